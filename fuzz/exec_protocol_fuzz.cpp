// Fuzz target: one line of the ws1-exec-v1 protocol (docs/external-backend.md) through its three
// parsers: parse_worker_hello and parse_reply (what a worker sends ws1check) and
// parse_client_message (what `ws1check worker` reads). A message a parser accepts is encoded
// again and must parse back to the same message (its encoding is compared).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "exec_protocol.hpp"

namespace {

[[noreturn]] void mismatch(const char* what, const std::string& line) {
  std::fprintf(stderr, "exec_protocol_fuzz: %s: %s\n", what, line.c_str());
  std::abort();
}

// encode(parse(encode(m))) == encode(m): the encoding is a fixed point of the parser.
template <class T, class Parse>
void round_trip(const T& message, Parse&& parse, const char* what) {
  const std::string line = ws1::exec::encode(message);
  auto back = parse(line);
  if (!back) mismatch(what, line + " -> " + ws1::exec::describe(back.error()));
  if (ws1::exec::encode(*back) != line) mismatch(what, line + " -> " + ws1::exec::encode(*back));
}

std::string encode_client(const ws1::exec::ClientMessage& m) {
  return std::visit([](const auto& v) { return ws1::exec::encode(v); }, m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);

  if (auto hello = ws1::exec::parse_worker_hello(line))
    round_trip(*hello, ws1::exec::parse_worker_hello, "worker hello");
  else
    (void)ws1::exec::describe(hello.error());

  if (auto reply = ws1::exec::parse_reply(line))
    round_trip(*reply, ws1::exec::parse_reply, "reply");
  else
    (void)ws1::exec::describe(reply.error());

  if (auto message = ws1::exec::parse_client_message(line)) {
    const std::string encoded = encode_client(*message);
    auto back = ws1::exec::parse_client_message(encoded);
    if (!back) mismatch("client message", encoded + " -> " + ws1::exec::describe(back.error()));
    if (encode_client(*back) != encoded) mismatch("client message", encoded);
  } else {
    (void)ws1::exec::describe(message.error());
  }
  return 0;
}
