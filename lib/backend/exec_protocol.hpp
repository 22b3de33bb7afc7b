// Internal: the messages of the external-candidate protocol (docs/external-backend.md), one JSON
// object per line, and their encoding (nlohmann) and strict parsing (simdjson through
// lib/json). Both sides use it: the exec backend (client) and `ws1check worker` (server).
//
// Parsing never throws: a message that is not valid JSON, misses a required field, has a field
// of the wrong type or an unknown field is an Error whose `where` is the JSON path ("$" for the
// whole line, "readback.device", ...) and whose `problem` says what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ws1/dtype.hpp"
#include "ws1/error.hpp"
#include "ws1/evidence.hpp"
#include "ws1/op.hpp"
#include "ws1/tensor.hpp"

namespace ws1::exec {

// "forward" / "backward": the protocol's spelling of a direction.
std::string_view protocol_direction(Direction d);

// What a worker reads back about the path its kernels run on.
struct WorkerReadback {
  std::string device;                           // "NVIDIA H200", "cpu: <model>"
  std::optional<bool> tf32_enabled;             // null: no TF32-capable unit on this path
  std::optional<std::string> cublas_math_mode;  // null/absent: no cuBLAS on this path
  std::optional<std::string> autocast;          // absent: not applicable
  RuntimeReadback runtime() const;
};

// ws1check -> worker, first line.
struct ClientHello {
  std::string protocol;
  std::string client;        // "ws1check 0.1.0 (source <commit>)"
  std::string exchange_dir;  // where the tensor files of every request lie
};

// worker -> ws1check, answer to the hello: the ops it serves, by direction, with kernel ids.
struct WorkerHello {
  std::string protocol;
  std::string backend;  // its profile name, e.g. "triton_cuda_bf16"
  std::map<std::string, std::map<Direction, std::string>> kernels;  // op -> direction -> kernel id
  WorkerReadback readback;
  // Optional ("input_cache_bytes"): the worker keeps inputs ws1check asks it to keep, up to this
  // many bytes, so that a tensor sent once (a weight) need not be sent again. Absent: no cache.
  std::optional<std::uint64_t> input_cache_bytes;
  const std::string* kernel(std::string_view op, Direction d) const;
};

struct OutputDecl {
  std::string name;
  DType dtype = DType::kBF16;
};

// ws1check -> worker: run one op in one direction on the tensors of `input_file`.
struct RunRequest {
  std::uint64_t id = 0;  // 1, 2, 3, ... in order
  std::string op;
  Direction direction = Direction::kForward;
  std::string input_file;
  std::string output_file;           // where the worker should write its outputs
  std::vector<OutputDecl> outputs;   // the tensors the op returns, with their dtypes
  OpContext context;                 // threads is not sent
  // Only to a worker that announced input_cache_bytes; the worker drops `evict` first, then reads
  // the file, keeps each tensor of `store` under its key, and takes each input of `cached` (not
  // in the file) from what it keeps. Keys are "xxh3-128:<hex>" of the tensor's dtype, shape and
  // bytes, so the same key is the same tensor.
  std::map<std::string, std::string> cached;  // input name -> key
  std::map<std::string, std::string> store;   // input name -> key
  std::vector<std::string> evict;             // keys
};

// The key of a tensor in a worker's input cache: "xxh3-128:" + hash of dtype, shape and bytes.
std::string input_cache_key(const Tensor& t);

// ws1check -> worker: the session ends (the worker exits 0 without a reply).
struct Shutdown {};

// worker -> ws1check, answer to a RunRequest: a result or the worker's own error.
struct RunReply {
  std::uint64_t id = 0;
  std::optional<std::string> error;  // {"type": "error", "message": ...}
  std::string output_file;
  std::string kernel_id;
  WorkerReadback readback;
};

std::string encode(const ClientHello& m);
std::string encode(const WorkerHello& m);
std::string encode(const RunRequest& m);
std::string encode(const Shutdown& m);
std::string encode(const RunReply& m);
// An error reply (to request `id`, or to the hello when id is absent).
std::string encode_error(std::optional<std::uint64_t> id, std::string_view message);

// The worker's first line. A hello in another protocol version is an Error saying which one
// (nothing else of it is read); {"type": "error"} is an Error carrying the worker's message.
Result<WorkerHello> parse_worker_hello(std::string_view line);
Result<RunReply> parse_reply(std::string_view line);

using ClientMessage = std::variant<ClientHello, RunRequest, Shutdown>;
Result<ClientMessage> parse_client_message(std::string_view line);

// A parse Error as one phrase: "readback.device: missing required key".
std::string describe(const Error& e);

}  // namespace ws1::exec
