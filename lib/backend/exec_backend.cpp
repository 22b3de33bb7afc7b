// exec: the client side of ws1-exec-v1 (docs/external-backend.md). One worker per backend,
// started at construction, handshake first; then one request at a time: inputs written to the
// exchange directory, a `run` line, one reply line within the time-out, outputs read back and
// checked. A failure of the handshake is exit 3. A failure of a request is that call's Error
// (a red cell): the worker's own error reply, an op it does not provide, outputs with wrong
// names, dtypes or shapes, a kernel id it did not announce, a TF32 readback, or a broken
// session — time-out, exit, malformed or out-of-order reply — after which the worker is stopped
// and every later request fails at once with the reason (never a hang, never a silent pass).
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "exchange.hpp"
#include "exec_protocol.hpp"
#include "worker_process.hpp"
#include "ws1/build_info.hpp"
#include "ws1/exec_backend.hpp"
#include "ws1/op_catalogue.hpp"
#include "ws1/safetensors.hpp"

namespace ws1 {
namespace {

using namespace ws1::exec;

std::string seconds(std::chrono::milliseconds t) {
  return fmt::format("{:g} s", static_cast<double>(t.count()) / 1000.0);
}

// A backend id names evidence files and cell ids: a plain word.
bool valid_backend_id(std::string_view id) {
  if (id.empty() || id.size() > 64 || id.front() == '.') return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

std::vector<OutputDecl> output_decls(const std::vector<TensorDecl>& decls) {
  std::vector<OutputDecl> out;
  for (const TensorDecl& d : decls) out.push_back({d.name, d.candidate_dtype});
  return out;
}

class ExecBackend final : public Backend {
 public:
  ExecBackend(ExecOptions options, std::unique_ptr<ExchangeDir> dir,
              std::unique_ptr<WorkerProcess> worker, WorkerHello hello)
      : options_(std::move(options)), dir_(std::move(dir)), worker_(std::move(worker)),
        hello_(std::move(hello)), latest_(hello_.readback) {
    if (hello_.input_cache_bytes && options_.input_cache_min_bytes > 0)
      cache_.emplace(*hello_.input_cache_bytes, options_.input_cache_min_bytes);
  }

  ~ExecBackend() override {
    if (cache_ && cache_->hits() > 0)
      spdlog::info("{}: {} inputs ({:.3g} GB) named by content key instead of sent again (the worker's input cache)",
                   name(), cache_->hits(), static_cast<double>(cache_->bytes_not_sent()) / 1e9);
    if (!stopped_) (void)worker_->send_line(encode(Shutdown{}), Clock::now() + std::chrono::seconds(1));
    worker_->finish(std::chrono::seconds(10));  // before the directory goes
  }

  std::string name() const override { return hello_.backend; }

  std::string kernel_id(const Op& op, Direction d) const override {
    const std::string* k = hello_.kernel(op.name(), d);
    if (k == nullptr) return "none (not provided by the worker)";
    return fmt::format("{} on {}", *k, hello_.readback.device);
  }

  bool serves(const Op& op, Direction d) const override { return hello_.kernel(op.name(), d) != nullptr; }
  bool receives_views() const override { return false; }

  Result<Tensors> forward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return call(op, Direction::kForward, in, ctx);
  }
  Result<Tensors> backward(const Op& op, const Tensors& in, const OpContext& ctx) override {
    return call(op, Direction::kBackward, in, ctx);
  }

  ExecCacheStats cache_stats() const {
    std::lock_guard lock(mutex_);
    if (!cache_) return {};
    return {true, cache_->hits(), cache_->bytes_not_sent()};
  }

  RuntimeReadback readback() const override {
    std::lock_guard lock(mutex_);
    return latest_.runtime();
  }

 private:
  Result<Tensors> call(const Op& op, Direction d, const Tensors& in, const OpContext& ctx);
  // The line the worker answers `request` with; a failure stops the worker.
  Result<std::string> exchange(const std::string& request);
  Error stop(const Op& op, Direction d, std::string problem);
  Error fail(const Op& op, Direction d, std::string problem) const {
    return Error{name(), fmt::format("{} {}", op.name(), protocol_direction(d)), std::move(problem),
                 ExitCode::kEnvironment};
  }

  ExecOptions options_;
  std::unique_ptr<ExchangeDir> dir_;       // declared before worker_: outlives it
  std::unique_ptr<WorkerProcess> worker_;
  WorkerHello hello_;
  mutable std::mutex mutex_;               // one request at a time
  WorkerReadback latest_;                  // from the hello, then from each reply
  std::uint64_t requests_ = 0;
  std::optional<std::string> stopped_;     // why the worker was stopped
  std::optional<InputCacheBook> cache_;    // where the worker keeps inputs for us
};

Result<std::string> ExecBackend::exchange(const std::string& request) {
  const auto deadline = Clock::now() + options_.timeout;
  if (Status sent = worker_->send_line(request, deadline); !sent) return sent.error();
  auto line = worker_->read_line(deadline);
  if (!line && line.error().problem == WorkerProcess::kTimedOut)
    return Error{"", "", fmt::format("no reply within {} ({})", seconds(options_.timeout), kExecTimeoutEnv)};
  return line;
}

Error ExecBackend::stop(const Op& op, Direction d, std::string problem) {
  worker_->kill();
  stopped_ = fmt::format("{} {}: {}", op.name(), protocol_direction(d), problem);
  return fail(op, d, problem + "; the worker was stopped" + worker_->stderr_note());
}

Result<Tensors> ExecBackend::call(const Op& op, Direction d, const Tensors& in, const OpContext& ctx) {
  std::lock_guard lock(mutex_);
  const std::string* kernel = hello_.kernel(op.name(), d);
  if (kernel == nullptr) return fail(op, d, "not provided by the worker");
  if (stopped_) return fail(op, d, "not run: the worker was stopped earlier (" + *stopped_ + ")");
  const bool backward = d == Direction::kBackward;
  std::vector<TensorDecl> decls = backward ? op.gradients() : op.outputs();
  // A tensor-parallel rank's call (k_partial) returns the split GEMM's output as its FP32 partial.
  if (!backward && ctx.k_partial)
    if (auto split = op.k_split())
      for (TensorDecl& t : decls)
        if (t.name == split->out) t.candidate_dtype = DType::kF32;

  const std::uint64_t id = ++requests_;
  RequestFiles files{{dir_->input_file(id), dir_->output_file(id)}};
  RunRequest request{id, std::string(op.name()), d, files.files[0].string(), files.files[1].string(),
                     output_decls(decls), ctx, {}, {}, {}};
  const Tensors sent = cache_ ? cache_->plan(in, request.cached, request.store, request.evict) : in;
  if (Status st = write_safetensors(files.files[0], sent, {}, Durability::kTransient); !st) {
    if (cache_) cache_->forget(request.store);
    return fail(op, d, "cannot write the inputs: " + st.error().message());
  }

  auto line = exchange(encode(request));
  if (!line) return stop(op, d, line.error().problem);
  auto reply = parse_reply(*line);
  if (!reply) return stop(op, d, "malformed reply: " + describe(reply.error()));
  if (reply->id != id)
    return stop(op, d, fmt::format("a reply to request {} while request {} was waiting", reply->id, id));
  if (reply->error) {
    if (cache_) {  // what the worker keeps is unknown now: resend those next time
      cache_->forget(request.store);
      cache_->forget(request.cached);
    }
    return fail(op, d, "the worker reports an error: " + *reply->error);
  }

  if (!dir_->holds(reply->output_file))
    return fail(op, d, fmt::format("its output_file {} is not in the exchange directory {}",
                                   reply->output_file, dir_->path().string()));
  files.files.emplace_back(reply->output_file);
  if (reply->kernel_id != *kernel)
    return fail(op, d, fmt::format("it ran kernel '{}' but announced '{}' for this op", reply->kernel_id, *kernel));
  latest_ = reply->readback;
  if (latest_.tf32_enabled.value_or(false))
    return fail(op, d, "its readback says TF32 is enabled (spec 2.1: disabled on the candidate path)");
  auto out = read_outputs(reply->output_file, decls, in, backward);
  if (!out) return fail(op, d, out.error().problem);
  return out;
}

// The handshake: hello out, hello back within the time-out, checked.
Result<WorkerHello> handshake(WorkerProcess& worker, const ExchangeDir& dir, const ExecOptions& o) {
  const auto& b = build_info();
  const ClientHello hello{std::string(kExecProtocol),
                          fmt::format("ws1check {} (source {})", b.version, b.source_commit),
                          dir.path().string()};
  const auto deadline = Clock::now() + o.timeout;
  if (Status sent = worker.send_line(encode(hello), deadline); !sent) return sent.error();
  auto line = worker.read_line(deadline);
  if (!line && line.error().problem == WorkerProcess::kTimedOut)
    return Error{"", "", fmt::format("no hello within {} ({})", seconds(o.timeout), kExecTimeoutEnv)};
  if (!line) return line.error();
  auto h = parse_worker_hello(*line);
  if (!h) return Error{"", "", (h.error().where.empty() ? "" : "bad hello: ") + describe(h.error())};
  if (!valid_backend_id(h->backend))
    return Error{"", "", fmt::format("bad hello: backend \"{}\" is not a plain name ([A-Za-z0-9_.-], "
                                     "at most 64 characters)", h->backend)};
  if (!o.profile.empty() && h->backend != o.profile)
    return Error{"", "", fmt::format("it announces backend \"{}\", expected \"{}\"", h->backend, o.profile)};
  for (const auto& [op, directions] : h->kernels)
    if (!find_op(op)) return Error{"", "", fmt::format("bad hello: ops.{}: not an op of the catalogue", op)};
  return h;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_exec_backend(const ExecOptions& o) {
  const std::string where =
      o.profile.empty() ? "exec:" + o.command : fmt::format("{} (worker `{}`)", o.profile, o.command);
  if (o.command.find_first_not_of(" \t") == std::string::npos)
    return bad_input(o.origin, where, "no worker command (expected exec:COMMAND)");
  const auto environment = [&](std::string problem) {
    return Error{o.origin, where, std::move(problem), ExitCode::kEnvironment};
  };
  auto dir = ExchangeDir::create();
  if (!dir) return environment(dir.error().problem);
  auto worker = WorkerProcess::start(o.command);
  if (!worker) return environment(worker.error().problem);
  auto hello = handshake(**worker, **dir, o);
  if (!hello) {
    (*worker)->kill();
    return environment("handshake failed: " + hello.error().problem + (*worker)->stderr_note());
  }
  return std::unique_ptr<Backend>(new ExecBackend(o, std::move(dir).value(), std::move(worker).value(),
                                                  std::move(hello).value()));
}

ExecCacheStats exec_cache_stats(const Backend& backend) {
  const auto* exec = dynamic_cast<const ExecBackend*>(&backend);
  return exec == nullptr ? ExecCacheStats{} : exec->cache_stats();
}

Result<std::chrono::milliseconds> exec_timeout_from_env() {
  const char* v = std::getenv(std::string(kExecTimeoutEnv).c_str());
  if (v == nullptr || *v == '\0') return kExecDefaultTimeout;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 1e7)
    return bad_input(std::string(kExecTimeoutEnv), v, "expected a positive number of seconds");
  return std::chrono::milliseconds(std::max<long long>(std::llround(s * 1000.0), 1));
}

Result<std::uint64_t> exec_cache_min_bytes_from_env() {
  const char* v = std::getenv(std::string(kExecCacheMinBytesEnv).c_str());
  if (v == nullptr || *v == '\0') return ExecOptions{}.input_cache_min_bytes;
  const std::string_view text(v);
  std::uint64_t n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc{} || end != text.data() + text.size())
    return bad_input(std::string(kExecCacheMinBytesEnv), v, "expected a number of bytes (0: no input cache)");
  return n;
}

}  // namespace ws1
