// The serving side of ws1-exec-v1 (`ws1check worker`): a built-in backend answers ws1check's
// requests. The hello announces every op of the registry (backward only where the op has
// gradients) with the backend's kernel ids; each request reads its input file, runs the op
// and writes the output file. An op's failure or an unreadable input is an error reply and
// serving goes on; a line that breaks the protocol ends serving.
#include <fmt/format.h>

#include <istream>
#include <ostream>
#include <variant>

#include "exec_protocol.hpp"
#include "ws1/exec_backend.hpp"
#include "ws1/safetensors.hpp"

namespace ws1 {
namespace {

using namespace ws1::exec;

Error protocol_error(std::string problem) {
  return Error{"ws1check worker", "stdin", std::move(problem), ExitCode::kEnvironment};
}

void say(std::ostream& out, const std::string& line) {
  out << line << '\n';
  out.flush();
}

WorkerReadback readback_of(const Backend& backend, const std::string& device) {
  const RuntimeReadback r = backend.readback();
  return WorkerReadback{device, r.tf32_enabled, r.cublas_math_mode, r.autocast};
}

WorkerHello hello_of(const Backend& backend, const std::string& device) {
  WorkerHello h{std::string(kExecProtocol), backend.name(), {}, readback_of(backend, device)};
  for (const Op* op : all_ops()) {
    auto& k = h.kernels[std::string(op->name())];
    k[Direction::kForward] = backend.kernel_id(*op, Direction::kForward);
    if (!op->gradients().empty()) k[Direction::kBackward] = backend.kernel_id(*op, Direction::kBackward);
  }
  return h;
}

// One request: the reply line (a result or an error).
std::string answer(Backend& backend, const std::string& device, unsigned threads, const RunRequest& r) {
  const Op* op = find_op_impl(r.op);
  if (op == nullptr) return encode_error(r.id, fmt::format("no op '{}' in this worker", r.op));
  auto in = read_safetensors(r.input_file);
  if (!in) return encode_error(r.id, in.error().message());
  OpContext ctx = r.context;
  ctx.threads = threads;
  auto out = r.direction == Direction::kForward ? backend.forward(*op, in->tensors, ctx)
                                                : backend.backward(*op, in->tensors, ctx);
  if (!out) return encode_error(r.id, out.error().message());
  if (Status st = write_safetensors(r.output_file, *out, {}, Durability::kTransient); !st)
    return encode_error(r.id, st.error().message());
  return encode(RunReply{r.id, std::nullopt, r.output_file, backend.kernel_id(*op, r.direction),
                         readback_of(backend, device)});
}

}  // namespace

Status serve_exec_worker(Backend& backend, const std::string& device, unsigned threads,
                         std::istream& in, std::ostream& out) {
  std::string line;
  if (!std::getline(in, line)) return protocol_error("closed before the hello");
  auto first = parse_client_message(line);
  const auto* hello = first ? std::get_if<ClientHello>(&*first) : nullptr;
  if (hello == nullptr) {
    say(out, encode_error(std::nullopt, "expected a hello"));
    return protocol_error("expected a hello" + (first ? "" : ": " + describe(first.error())));
  }
  if (hello->protocol != kExecProtocol) {
    const std::string problem =
        fmt::format("this worker speaks \"{}\", not \"{}\"", kExecProtocol, hello->protocol);
    say(out, encode_error(std::nullopt, problem));
    return protocol_error(problem);
  }
  say(out, encode(hello_of(backend, device)));

  while (std::getline(in, line)) {
    auto m = parse_client_message(line);
    if (!m) return protocol_error("malformed message: " + describe(m.error()));
    if (std::holds_alternative<Shutdown>(*m)) return {};
    const auto* request = std::get_if<RunRequest>(&*m);
    if (request == nullptr) return protocol_error("a second hello");
    say(out, answer(backend, device, threads, *request));
  }
  return {};  // ws1check closed stdin: the session is over
}

}  // namespace ws1
