#include "exec_protocol.hpp"

#include <fmt/format.h>

#include <optional>

#include <nlohmann/json.hpp>

#include "json_node.hpp"
#include "ws1/contract.hpp"
#include "ws1/exec_backend.hpp"
#include "ws1/hash.hpp"

namespace ws1::exec {
namespace {

using nlohmann::json;
using ws1::json::Node;

// The display name of every message in errors; describe() leaves it out.
const std::string kMessage = "message";

// One line: compact, and invalid UTF-8 (a path from $TMPDIR) replaced rather than thrown on.
std::string line_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::optional<Direction> direction_from(std::string_view s) {
  if (s == "forward") return Direction::kForward;
  if (s == "backward") return Direction::kBackward;
  return std::nullopt;
}

json readback_json(const WorkerReadback& r) {
  json j = {{"device", r.device},
            {"tf32_enabled", r.tf32_enabled ? json(*r.tf32_enabled) : json(nullptr)},
            {"cublas_math_mode", r.cublas_math_mode ? json(*r.cublas_math_mode) : json(nullptr)}};
  if (r.autocast) j["autocast"] = *r.autocast;
  return j;
}

std::optional<std::string> optional_string(const Node& n, std::string_view key) {
  auto v = n.find(key);
  if (!v || v->type_name() == "null") return std::nullopt;
  return std::string(v->string());
}

WorkerReadback parse_readback(const Node& n) {
  n.allow_only({"device", "tf32_enabled", "cublas_math_mode", "autocast"});
  WorkerReadback r;
  r.device = n.at("device").nonempty_string();
  const Node tf32 = n.at("tf32_enabled");
  if (tf32.type_name() != "null") r.tf32_enabled = tf32.boolean();
  r.cublas_math_mode = optional_string(n, "cublas_math_mode");
  r.autocast = optional_string(n, "autocast");
  return r;
}

std::string message_type(const Node& root) {
  if (root.type_name() != "object") root.fail("must be a JSON object, got " + std::string(root.type_name()));
  return std::string(root.at("type").string());
}

// The line as it came, for an error message: quoted, control bytes escaped, cut at 160 bytes.
std::string quoted_line(std::string_view line) {
  constexpr std::size_t kMost = 160;
  std::string out = "\"";
  for (std::size_t i = 0; i < line.size() && i < kMost; ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (c == '"' || c == '\\') out += '\\';
    if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  out += '"';
  if (line.size() > kMost) out += fmt::format(" (first {} of {} bytes)", kMost, line.size());
  return out;
}

// Runs `parse` on the line's root; a json::Failure becomes the returned Error.
template <class T, class F>
Result<T> parse_line(std::string_view line, F&& parse) {
  // A worker's stray print (a debug line on stdout) is the usual cause of a line that is not a
  // message: quote it and name the rule rather than report a JSON syntax error alone.
  const auto first = line.find_first_not_of(" \t\r");
  if (first == std::string_view::npos || line[first] != '{')
    return Error{"", "",
                 fmt::format("a line that is not a protocol message: {} (a worker's "
                             "stdout carries protocol messages only, one JSON object per line; "
                             "logs and debug output go to stderr)",
                             quoted_line(line))};
  simdjson::dom::parser parser;
  std::optional<Node> root;
  try {
    root.emplace(ws1::json::parse_document(parser, line, kMessage));
  } catch (const ws1::json::Failure& f) {
    Error e = f.error;  // not JSON: the parser's words, and the line
    e.problem += fmt::format(" in the line {}", quoted_line(line));
    return e;
  }
  try {
    return parse(*root);
  } catch (const ws1::json::Failure& f) {
    return f.error;
  }
}

OpContext parse_context(const Node& n) {
  n.allow_only({"rms_norm_eps", "rope_theta", "num_attention_heads", "num_key_value_heads",
                "head_dim", "rms_norm_order", "k_shards", "k_partial", "ignore_index",
                "k_tree_leaf"});
  OpContext c;
  c.rms_norm_eps = n.at("rms_norm_eps").nonnegative();
  c.rope_theta = n.at("rope_theta").nonnegative();
  c.num_attention_heads = n.at("num_attention_heads").integer();
  c.num_key_value_heads = n.at("num_key_value_heads").integer();
  c.head_dim = n.at("head_dim").integer();
  c.rms_norm_order = n.at("rms_norm_order").word(rms_norm_order_from_name, "rms_norm_order", "kernel, hf");
  // k_shards / k_partial (det_gemm's declared K split, a tensor-parallel rank's call):
  // optional, so a host that predates them is served; such a host's k_tree_leaf (the Option B
  // tree's leaf, which no kernel computes any more) is accepted and ignored.
  if (auto v = n.find("k_shards")) c.k_shards = v->integer();
  if (auto v = n.find("k_partial")) c.k_partial = v->boolean();
  c.ignore_index = n.at("ignore_index").integer();
  return c;
}

std::map<std::string, std::string> parse_keys(const Node& n) {
  std::map<std::string, std::string> keys;
  for (const auto& [name, key] : n.fields()) keys[std::string(name)] = std::string(key.nonempty_string());
  return keys;
}

RunRequest parse_request(const Node& root) {
  root.allow_only({"type", "id", "op", "direction", "input_file", "output_file", "outputs", "context",
                   "cached", "store", "evict"});
  RunRequest r;
  r.id = root.at("id").uint64();
  r.op = root.at("op").nonempty_string();
  r.direction = root.at("direction").word(direction_from, "direction", "forward, backward");
  r.input_file = root.at("input_file").nonempty_string();
  r.output_file = root.at("output_file").nonempty_string();
  for (const Node& o : root.at("outputs").items()) {
    o.allow_only({"name", "dtype"});
    r.outputs.push_back({std::string(o.at("name").nonempty_string()),
                         o.at("dtype").word(dtype_from_safetensors_name, "dtype", "BF16, F32, I64, BOOL, ...")});
  }
  r.context = parse_context(root.at("context"));
  if (auto v = root.find("cached")) r.cached = parse_keys(*v);
  if (auto v = root.find("store")) r.store = parse_keys(*v);
  if (auto v = root.find("evict"))
    for (const Node& k : v->items()) r.evict.emplace_back(k.nonempty_string());
  return r;
}

}  // namespace

std::string_view protocol_direction(Direction d) {
  return d == Direction::kForward ? "forward" : "backward";
}

RuntimeReadback WorkerReadback::runtime() const {
  RuntimeReadback r;
  r.tf32_enabled = tf32_enabled;
  r.cublas_math_mode = cublas_math_mode;
  if (autocast) r.autocast = *autocast;
  return r;
}

const std::string* WorkerHello::kernel(std::string_view op, Direction d) const {
  auto it = kernels.find(std::string(op));
  if (it == kernels.end()) return nullptr;
  auto k = it->second.find(d);
  return k == it->second.end() ? nullptr : &k->second;
}

std::string input_cache_key(const Tensor& t) {
  Xxh3Hasher h;
  h.update(fmt::format("{} {};", dtype_safetensors_name(t.dtype()), shape_string(t.shape())));
  h.update(t.bytes());
  return "xxh3-128:" + h.hex();
}

std::string encode(const ClientHello& m) {
  return line_of({{"type", "hello"}, {"protocol", m.protocol}, {"client", m.client},
                  {"exchange_dir", m.exchange_dir}});
}

std::string encode(const WorkerHello& m) {
  json ops = json::object();
  for (const auto& [op, by_direction] : m.kernels) {
    json k = json::object();
    for (const auto& [d, id] : by_direction) k[std::string(protocol_direction(d))] = id;
    ops[op] = std::move(k);
  }
  json j = {{"type", "hello"}, {"protocol", m.protocol}, {"backend", m.backend},
            {"ops", std::move(ops)}, {"readback", readback_json(m.readback)}};
  if (m.input_cache_bytes) j["input_cache_bytes"] = *m.input_cache_bytes;
  return line_of(j);
}

std::string encode(const RunRequest& m) {
  json outputs = json::array();
  for (const OutputDecl& o : m.outputs)
    outputs.push_back({{"name", o.name}, {"dtype", std::string(dtype_safetensors_name(o.dtype))}});
  const OpContext& c = m.context;
  json context = {{"rms_norm_eps", c.rms_norm_eps},
                  {"rope_theta", c.rope_theta},
                  {"num_attention_heads", c.num_attention_heads},
                  {"num_key_value_heads", c.num_key_value_heads},
                  {"head_dim", c.head_dim},
                  {"rms_norm_order", std::string(contract_name(c.rms_norm_order))},
                  {"k_shards", c.k_shards},
                  {"k_partial", c.k_partial},
                  {"ignore_index", c.ignore_index}};
  json j = {{"type", "run"}, {"id", m.id}, {"op", m.op},
            {"direction", std::string(protocol_direction(m.direction))},
            {"input_file", m.input_file}, {"output_file", m.output_file},
            {"outputs", std::move(outputs)}, {"context", std::move(context)}};
  if (!m.cached.empty()) j["cached"] = m.cached;
  if (!m.store.empty()) j["store"] = m.store;
  if (!m.evict.empty()) j["evict"] = m.evict;
  return line_of(j);
}

std::string encode(const Shutdown&) { return line_of({{"type", "shutdown"}}); }

std::string encode(const RunReply& m) {
  if (m.error) return encode_error(m.id, *m.error);
  return line_of({{"type", "result"}, {"id", m.id}, {"output_file", m.output_file},
                  {"kernel_id", m.kernel_id}, {"readback", readback_json(m.readback)}});
}

std::string encode_error(std::optional<std::uint64_t> id, std::string_view message) {
  json j = {{"type", "error"}, {"message", std::string(message)}};
  if (id) j["id"] = *id;
  return line_of(j);
}

Result<WorkerHello> parse_worker_hello(std::string_view line) {
  return parse_line<WorkerHello>(line, [](const Node& root) -> Result<WorkerHello> {
    const std::string type = message_type(root);
    if (type == "error") {
      root.allow_only({"type", "message"});
      return Error{"", "", fmt::format("the worker refused the handshake: {}", root.at("message").string())};
    }
    if (type != "hello") root.at("type").fail(fmt::format("expected \"hello\", got \"{}\"", type));
    WorkerHello h;
    // The version first: a worker of another version may lay everything else out differently.
    h.protocol = root.at("protocol").string();
    if (h.protocol != kExecProtocol)
      return Error{"", "", fmt::format("the worker speaks protocol \"{}\"; this ws1check speaks \"{}\"",
                                       h.protocol, kExecProtocol)};
    root.allow_only({"type", "protocol", "backend", "ops", "readback", "input_cache_bytes"});
    h.backend = root.at("backend").nonempty_string();
    for (const auto& [op, directions] : root.at("ops").fields()) {
      directions.allow_only({"forward", "backward"});
      for (const auto& [d, id] : directions.fields())
        h.kernels[op][*direction_from(d)] = std::string(id.nonempty_string());
    }
    h.readback = parse_readback(root.at("readback"));
    if (auto v = root.find("input_cache_bytes")) h.input_cache_bytes = v->uint64();
    return h;
  });
}

Result<RunReply> parse_reply(std::string_view line) {
  return parse_line<RunReply>(line, [](const Node& root) -> Result<RunReply> {
    const std::string type = message_type(root);
    RunReply r;
    if (type == "error") {
      root.allow_only({"type", "id", "message"});
      r.id = root.at("id").uint64();
      r.error = std::string(root.at("message").string());
      return r;
    }
    if (type != "result") root.at("type").fail(fmt::format("expected \"result\" or \"error\", got \"{}\"", type));
    root.allow_only({"type", "id", "output_file", "kernel_id", "readback"});
    r.id = root.at("id").uint64();
    r.output_file = root.at("output_file").nonempty_string();
    r.kernel_id = root.at("kernel_id").nonempty_string();
    r.readback = parse_readback(root.at("readback"));
    return r;
  });
}

Result<ClientMessage> parse_client_message(std::string_view line) {
  return parse_line<ClientMessage>(line, [](const Node& root) -> Result<ClientMessage> {
    const std::string type = message_type(root);
    if (type == "hello") {
      root.allow_only({"type", "protocol", "client", "exchange_dir"});
      return ClientMessage{ClientHello{std::string(root.at("protocol").string()),
                                       std::string(root.at("client").string()),
                                       std::string(root.at("exchange_dir").string())}};
    }
    if (type == "run") return ClientMessage{parse_request(root)};
    if (type == "shutdown") {
      root.allow_only({"type"});
      return ClientMessage{Shutdown{}};
    }
    root.at("type").fail(fmt::format("expected \"hello\", \"run\" or \"shutdown\", got \"{}\"", type));
  });
}

std::string describe(const Error& e) {
  if (e.where.empty() || e.where == ws1::json::kRootPath) return e.problem;
  return e.where + ": " + e.problem;
}

}  // namespace ws1::exec
