// The serving side of ws1-exec-v1 (`ws1check worker`): a built-in backend answers ws1check's
// requests. The hello announces every op of the registry (backward only where the op has
// gradients) with the backend's kernel ids, and its input cache's capacity when it has one;
// each request reads its input file (and the kept inputs it names), runs the op and writes the
// output file. An op's failure or an unreadable input is an error reply and
// serving goes on; a line that breaks the protocol ends serving.
#include <fmt/format.h>

#include <istream>
#include <map>
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

// The inputs ws1check asked this worker to keep, by content key, within `capacity` bytes.
struct InputCache {
  std::uint64_t capacity = 0, used = 0;
  std::map<std::string, Tensor> held;

  void drop(const std::string& key) {
    if (auto it = held.find(key); it != held.end()) {
      used -= it->second.nbytes();
      held.erase(it);
    }
  }
  // Applies a request's evict and store lists to its file's tensors, then adds its cached ones.
  Status apply(const RunRequest& r, Tensors& tensors) {
    for (const std::string& key : r.evict) drop(key);
    for (const auto& [name, key] : r.store) {
      const Tensor* t = find_tensor(tensors, name);
      if (t == nullptr) return Error{"", "store", fmt::format("no input '{}' in the file to keep", name)};
      if (held.count(key) != 0) continue;
      if (used + t->nbytes() > capacity)
        return Error{"", "store", fmt::format("keeping '{}' ({} bytes) would exceed the announced {} bytes "
                                              "({} held)", name, t->nbytes(), capacity, used)};
      held.emplace(key, *t);
      used += t->nbytes();
    }
    for (const auto& [name, key] : r.cached) {
      auto it = held.find(key);
      if (it == held.end()) return Error{"", "cached", fmt::format("'{}': no tensor kept under {}", name, key)};
      tensors.push_back({name, it->second});
    }
    return {};
  }
};

WorkerHello hello_of(const Backend& backend, const std::string& device, std::uint64_t cache_bytes) {
  WorkerHello h{std::string(kExecProtocol), backend.name(), {}, readback_of(backend, device), std::nullopt};
  if (cache_bytes > 0) h.input_cache_bytes = cache_bytes;
  for (const Op* op : all_ops()) {
    auto& k = h.kernels[std::string(op->name())];
    k[Direction::kForward] = backend.kernel_id(*op, Direction::kForward);
    if (!op->gradients().empty()) k[Direction::kBackward] = backend.kernel_id(*op, Direction::kBackward);
  }
  return h;
}

// One request: the reply line (a result or an error).
std::string answer(Backend& backend, const std::string& device, unsigned threads, InputCache& cache,
                   const RunRequest& r) {
  const Op* op = find_op_impl(r.op);
  if (op == nullptr) return encode_error(r.id, fmt::format("no op '{}' in this worker", r.op));
  auto in = read_safetensors(r.input_file);
  if (!in) return encode_error(r.id, in.error().message());
  if ((!r.cached.empty() || !r.store.empty() || !r.evict.empty()) && cache.capacity == 0)
    return encode_error(r.id, "input cache: this worker announced none");
  if (Status st = cache.apply(r, in->tensors); !st)
    return encode_error(r.id, "input cache: " + st.error().where + ": " + st.error().problem);
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
                         std::uint64_t input_cache_bytes, std::istream& in, std::ostream& out) {
  InputCache cache{input_cache_bytes, 0, {}};
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
  say(out, encode(hello_of(backend, device, input_cache_bytes)));

  while (std::getline(in, line)) {
    auto m = parse_client_message(line);
    if (!m) return protocol_error("malformed message: " + describe(m.error()));
    if (std::holds_alternative<Shutdown>(*m)) return {};
    const auto* request = std::get_if<RunRequest>(&*m);
    if (request == nullptr) return protocol_error("a second hello");
    say(out, answer(backend, device, threads, cache, *request));
  }
  return {};  // ws1check closed stdin: the session is over
}

}  // namespace ws1
