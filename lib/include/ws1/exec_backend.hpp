// The external-candidate backend (docs/external-backend.md): ws1check starts a worker process
// once (`--backend exec:CMD`, or a named profile such as triton_cuda_bf16) and asks it, over the
// versioned JSON-lines protocol ws1-exec-v1 on its stdin/stdout, to run each op; tensors travel
// as safetensors files in a private temporary directory. Also the serving side, for
// `ws1check worker`, which offers any built-in backend over the same protocol.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>

#include "ws1/backend.hpp"
#include "ws1/error.hpp"

namespace ws1 {

inline constexpr std::string_view kExecProtocol = "ws1-exec-v1";
// Seconds to wait for the handshake and for each reply (a decimal number > 0).
inline constexpr std::string_view kExecTimeoutEnv = "WS1CHECK_EXEC_TIMEOUT";
inline constexpr std::chrono::milliseconds kExecDefaultTimeout{600'000};
// Bytes from which an input is kept in a worker's input cache (an integer >= 0; 0: no cache).
inline constexpr std::string_view kExecCacheMinBytesEnv = "WS1CHECK_EXEC_CACHE_MIN_BYTES";

struct ExecOptions {
  std::string command;  // run as `/bin/sh -c COMMAND`, in its own process group
  std::string profile;  // the backend id the worker must announce; empty: whatever it announces
  std::chrono::milliseconds timeout = kExecDefaultTimeout;
  std::string origin = "--backend";  // what named the worker, for error messages
  // Where the worker announces an input cache: inputs of at least this many bytes are sent once
  // and named by content key afterwards (0: never use the cache).
  std::uint64_t input_cache_min_bytes = 1 << 20;
};

// Starts the worker and completes the handshake. A worker that cannot be started, exits, stays
// silent past the time-out or answers anything but a valid ws1-exec-v1 hello is an environment
// error (exit 3) quoting the end of its stderr. After that, every failure of a request (time-out,
// crash, malformed reply, outputs with wrong names, dtypes or shapes, an op the worker does not
// provide) is the Error of that forward/backward call, which the runner turns into a red cell.
Result<std::unique_ptr<Backend>> make_exec_backend(const ExecOptions& options);

// What an exec backend's use of its worker's input cache saved so far (all zero for another
// backend, or where the worker announced no cache).
struct ExecCacheStats {
  bool enabled = false;
  std::uint64_t hits = 0;            // inputs named by key instead of sent
  std::uint64_t bytes_not_sent = 0;
};
ExecCacheStats exec_cache_stats(const Backend& backend);

// The time-out set by WS1CHECK_EXEC_TIMEOUT, else kExecDefaultTimeout; a value that is not a
// positive number of seconds is bad input naming the variable.
Result<std::chrono::milliseconds> exec_timeout_from_env();
// WS1CHECK_EXEC_CACHE_MIN_BYTES, else ExecOptions' default; anything but a decimal integer is bad
// input naming the variable.
Result<std::uint64_t> exec_cache_min_bytes_from_env();

// The serving side: answers the hello with every op `backend` runs, then each request, until
// ws1check sends shutdown or closes `in`. `device` is the readback's device; `threads` is given
// to the ops; `input_cache_bytes` > 0 announces an input cache of that capacity. Replies go to
// `out` (flushed per line); nothing else may be written there. An op's failure is an error
// reply; a message that breaks the protocol ends serving with an Error.
Status serve_exec_worker(Backend& backend, const std::string& device, unsigned threads,
                         std::uint64_t input_cache_bytes, std::istream& in, std::ostream& out);

}  // namespace ws1
