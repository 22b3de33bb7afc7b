// `ws1check worker --backend NAME`: serves a built-in backend over the external-candidate
// protocol ws1-exec-v1 on stdin/stdout (docs/external-backend.md), so that
// `--backend "exec:ws1check worker --backend cpu_bf16"` runs every cell through the protocol.
// stdout carries protocol lines only; logs and errors go to stderr.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "gpu_environment.hpp"
#include "run_support.hpp"
#include "ws1/environment.hpp"
#include "ws1/exec_backend.hpp"

namespace ws1cli {
namespace {

struct WorkerOptions {
  std::string backend;
  unsigned threads = 0;
  std::uint64_t input_cache_bytes = std::uint64_t{4} << 30;
};

int run_worker(const WorkerOptions& o) {
  if (o.backend.rfind("exec:", 0) == 0 || o.backend == "triton_cuda_bf16")
    return report(ws1::bad_input("--backend", o.backend, "a worker serves a built-in backend (cpu_bf16, cuda_bf16)"));
  ws1::Environment env;
  const bool gpu = fill_gpu_environment(env);
  auto backend = ws1::open_backend(o.backend, gpu);
  if (!backend) return report(backend.error());
  const std::string device =
      (*backend)->name() == "cpu_bf16" || !env.gpu ? "cpu: " + ws1::read_host().cpu_model : env.gpu->name;
  ws1::Status served = ws1::serve_exec_worker(**backend, device, o.threads, o.input_cache_bytes, std::cin, std::cout);
  return served ? 0 : report(served.error());
}

}  // namespace

Command register_worker(CLI::App& app) {
  auto o = std::make_shared<WorkerOptions>();
  auto* sub = app.add_subcommand(
      "worker", "serve a built-in backend over the external-candidate protocol on stdin/stdout");
  sub->add_option("--backend", o->backend, "the backend to serve: cpu_bf16 | cuda_bf16")->required();
  sub->add_option("--threads", o->threads, "CPU threads (0: all cores)");
  sub->add_option("--input-cache-bytes", o->input_cache_bytes,
                  "host memory for the inputs ws1check asks to keep (sent once, named by content key "
                  "afterwards); 0: no cache")
      ->capture_default_str();
  return {sub, [o] { return run_worker(*o); }};
}

}  // namespace ws1cli
