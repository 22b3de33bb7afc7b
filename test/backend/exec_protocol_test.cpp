// ws1-exec-v1 messages: each round-trips through its encoding, and parsing is strict (a
// missing, mistyped or unknown field, another version, a line that is not JSON).
#include <catch2/catch.hpp>

#include "exchange.hpp"
#include "exec_protocol.hpp"
#include "ws1/exec_backend.hpp"

using namespace ws1;
using namespace ws1::exec;

namespace {

const WorkerReadback kReadback{"NVIDIA H200", false, std::nullopt, std::string("torch autocast disabled")};

std::string problem_of(const Result<RunReply>& r) {
  REQUIRE_FALSE(r.ok());
  return describe(r.error());
}

}  // namespace

TEST_CASE("ws1-exec-v1: the hellos round-trip", "[exec][protocol]") {
  WorkerHello h{std::string(kExecProtocol), "triton_cuda_bf16", {}, kReadback};
  h.kernels["silu"][Direction::kForward] = "triton.silu_fwd@1";
  h.kernels["silu"][Direction::kBackward] = "triton.silu_bwd@1";
  auto back = parse_worker_hello(encode(h));
  REQUIRE(back.ok());
  CHECK(back->backend == "triton_cuda_bf16");
  CHECK(back->kernels == h.kernels);
  REQUIRE(back->kernel("silu", Direction::kBackward) != nullptr);
  CHECK(*back->kernel("silu", Direction::kBackward) == "triton.silu_bwd@1");
  CHECK(back->kernel("rms_norm", Direction::kForward) == nullptr);
  CHECK(back->readback.device == "NVIDIA H200");
  CHECK(back->readback.tf32_enabled == std::optional<bool>(false));
  CHECK_FALSE(back->readback.cublas_math_mode.has_value());
  CHECK(back->readback.runtime().autocast == "torch autocast disabled");

  auto client = parse_client_message(encode(ClientHello{std::string(kExecProtocol), "ws1check", "/tmp/x"}));
  REQUIRE(client.ok());
  const auto* ch = std::get_if<ClientHello>(&*client);
  REQUIRE(ch != nullptr);
  CHECK(ch->exchange_dir == "/tmp/x");
}

TEST_CASE("ws1-exec-v1: a request and its replies round-trip", "[exec][protocol]") {
  RunRequest r{7, "rms_norm", Direction::kBackward, "/d/req-7.in.safetensors", "/d/req-7.out.safetensors",
               {{"dx", DType::kBF16}, {"dweight", DType::kBF16}}, {}};
  r.context.rms_norm_eps = 1e-6;
  r.context.rms_norm_order = RmsNormOrder::kHf;
  r.context.k_shards = 4;
  r.context.k_partial = true;
  r.context.ignore_index = -7;
  r.context.num_attention_heads = 32;
  auto m = parse_client_message(encode(r));
  REQUIRE(m.ok());
  const auto* back = std::get_if<RunRequest>(&*m);
  REQUIRE(back != nullptr);
  CHECK(back->id == 7);
  CHECK(back->direction == Direction::kBackward);
  CHECK(back->outputs.size() == 2);
  CHECK(back->outputs[1].name == "dweight");
  CHECK(back->context.rms_norm_eps == 1e-6);  // exact: shortest round-trip spelling
  CHECK(back->context.rms_norm_order == RmsNormOrder::kHf);
  CHECK(back->context.k_shards == 4);
  CHECK(back->context.k_partial);
  CHECK(back->context.ignore_index == -7);
  CHECK(back->context.num_attention_heads == 32);
  CHECK(std::holds_alternative<Shutdown>(*parse_client_message(encode(Shutdown{}))));

  auto ok = parse_reply(encode(RunReply{7, std::nullopt, "/d/out", "k1", kReadback}));
  REQUIRE(ok.ok());
  CHECK(ok->id == 7);
  CHECK_FALSE(ok->error.has_value());
  CHECK(ok->kernel_id == "k1");
  auto err = parse_reply(encode_error(7, "rms_norm: x: bad"));
  REQUIRE(err.ok());
  CHECK(err->error == std::optional<std::string>("rms_norm: x: bad"));
}

TEST_CASE("ws1-exec-v1: replies are parsed strictly", "[exec][protocol]") {
  const std::string rb = R"("readback":{"device":"d","tf32_enabled":null})";
  // A stray print on the worker's stdout: quoted, and the rule named.
  const std::string stray = problem_of(parse_reply("DEBUG step=3 \"x\"\tdone"));
  CHECK_THAT(stray, Catch::Contains("not a protocol message: \"DEBUG step=3 \\\"x\\\"\\x09done\""));
  CHECK_THAT(stray, Catch::Contains("stdout carries protocol messages only"));
  CHECK_THAT(problem_of(parse_reply("Traceback (most recent call last):")), Catch::Contains("\"Traceback (most"));
  CHECK_THAT(problem_of(parse_reply(std::string(300, 'x'))), Catch::Contains("(first 160 of 300 bytes)"));
  // A line that looks like a message but is not JSON: the parser's error, with the line.
  CHECK_THAT(problem_of(parse_reply(R"({"type":"result",)")), Catch::Contains("not valid JSON"));
  CHECK_THAT(problem_of(parse_reply(R"({"type":"result",)")), Catch::Contains("in the line \"{\\\"type\\\""));
  CHECK(problem_of(parse_reply(R"({"type":"result","id":1,"output_file":"/o",)" + rb + "}")) ==
        "kernel_id: missing required key");
  CHECK_THAT(problem_of(parse_reply(R"({"type":"result","id":1,"output_file":"/o","kernel_id":"k","bogus":1,)" + rb + "}")),
             Catch::StartsWith("bogus: unknown key"));
  CHECK_THAT(problem_of(parse_reply(R"({"type":"result","id":"1","output_file":"/o","kernel_id":"k",)" + rb + "}")),
             Catch::StartsWith("id: must be an integer"));
  CHECK_THAT(problem_of(parse_reply(R"({"type":"result","id":1,"output_file":"/o","kernel_id":"k","readback":{"device":"d","tf32_enabled":"no"}})")),
             Catch::StartsWith("readback.tf32_enabled: must be true or false"));
  CHECK_THAT(problem_of(parse_reply(R"({"type":"hello"})")), Catch::Contains("expected \"result\" or \"error\""));
  CHECK_THAT(problem_of(parse_reply("[1]")), Catch::Contains("not a protocol message"));
  CHECK_THAT(problem_of(parse_reply(R"({"type":1})")), Catch::Contains("type"));
}

TEST_CASE("ws1-exec-v1: the worker's hello is checked, its version first", "[exec][protocol]") {
  auto other = parse_worker_hello(R"({"type":"hello","protocol":"ws1-exec-v2","whatever":1})");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().problem == R"(the worker speaks protocol "ws1-exec-v2"; this ws1check speaks "ws1-exec-v1")");
  auto refused = parse_worker_hello(R"({"type":"error","message":"needs ws1-exec-v3"})");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().problem == "the worker refused the handshake: needs ws1-exec-v3");
  auto bad_direction = parse_worker_hello(
      R"({"type":"hello","protocol":"ws1-exec-v1","backend":"b","ops":{"silu":{"fwd":"k"}},"readback":{"device":"d","tf32_enabled":null}})");
  REQUIRE_FALSE(bad_direction.ok());
  CHECK_THAT(describe(bad_direction.error()), Catch::StartsWith("ops.silu.fwd: unknown key"));
  auto no_readback = parse_worker_hello(R"({"type":"hello","protocol":"ws1-exec-v1","backend":"b","ops":{}})");
  REQUIRE_FALSE(no_readback.ok());
  CHECK(describe(no_readback.error()) == "readback: missing required key");
}

TEST_CASE("ws1-exec-v1: the optional input cache round-trips and is parsed strictly", "[exec][protocol]") {
  WorkerHello h{std::string(kExecProtocol), "triton_cuda_bf16", {}, kReadback, std::uint64_t{1} << 34};
  auto hello = parse_worker_hello(encode(h));
  REQUIRE(hello.ok());
  CHECK(hello->input_cache_bytes == std::uint64_t{1} << 34);
  h.input_cache_bytes.reset();  // absent: no cache, and the line does not name one
  CHECK(encode(h).find("input_cache_bytes") == std::string::npos);
  CHECK_FALSE(parse_worker_hello(encode(h))->input_cache_bytes.has_value());
  auto bad = parse_worker_hello(R"({"type":"hello","protocol":"ws1-exec-v1","backend":"b","ops":{},)"
                                R"("readback":{"device":"d","tf32_enabled":null},"input_cache_bytes":-1})");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(describe(bad.error()), Catch::StartsWith("input_cache_bytes:"));

  RunRequest r{7, "lm_head", Direction::kBackward, "/x/in", "/x/out", {{"dhidden", DType::kBF16}}, OpContext{}};
  CHECK(encode(r).find("cached") == std::string::npos);  // a worker without a cache sees v1's fields only
  r.cached = {{"weight", "xxh3-128:00ff"}};
  r.store = {{"hidden", "xxh3-128:0a0b"}};
  r.evict = {"xxh3-128:dead", "xxh3-128:beef"};
  auto m = parse_client_message(encode(r));
  REQUIRE(m.ok());
  const auto* back = std::get_if<RunRequest>(&*m);
  REQUIRE(back != nullptr);
  CHECK(back->cached == r.cached);
  CHECK(back->store == r.store);
  CHECK(back->evict == r.evict);
  std::string line = encode(r);
  line.replace(line.find("\"xxh3-128:dead\""), 15, "3");
  auto mistyped = parse_client_message(line);
  REQUIRE_FALSE(mistyped.ok());
  CHECK_THAT(describe(mistyped.error()), Catch::StartsWith("evict[0]:"));
}

TEST_CASE("input cache book: sent once, then named; least recently used out first; unsure keys resent",
          "[exec][protocol]") {
  const auto filled = [](std::int64_t n, float v) {
    Tensor t(DType::kF32, {n});
    for (std::int64_t i = 0; i < n; ++i) t.data<float>()[i] = v;
    return t;
  };
  const Tensor a = filled(100, 1), b = filled(100, 2), c = filled(100, 3), small = filled(2, 4);
  InputCacheBook book(/*capacity*/ 800, /*min_bytes*/ 64);  // room for two 400-byte tensors
  std::map<std::string, std::string> cached, store;
  std::vector<std::string> evict;
  const auto plan = [&](const Tensors& in) {
    cached.clear();
    store.clear();
    evict.clear();
    return book.plan(in, cached, store, evict);
  };
  Tensors sent = plan({{"a", a}, {"b", b}, {"s", small}});
  CHECK(sent.size() == 3);  // first time: all in the file, a and b to keep; s too small to keep
  CHECK(store == std::map<std::string, std::string>{{"a", input_cache_key(a)}, {"b", input_cache_key(b)}});
  CHECK(book.held_bytes() == 800);
  sent = plan({{"x", a}, {"s", small}});  // the same bytes under another name: the same key
  REQUIRE(sent.size() == 1);
  CHECK(sent[0].name == "s");
  CHECK(cached == std::map<std::string, std::string>{{"x", input_cache_key(a)}});
  CHECK(book.hits() == 1);
  CHECK(book.bytes_not_sent() == 400);
  sent = plan({{"c", c}});  // room for c: b (used least recently) goes
  CHECK(evict == std::vector<std::string>{input_cache_key(b)});
  CHECK(store.count("c") == 1);
  CHECK(input_cache_key(a) != input_cache_key(filled(100, 1.5f)));
  CHECK(input_cache_key(Tensor(DType::kF32, {10, 10})) != input_cache_key(Tensor(DType::kF32, {100})));
  book.forget(store);  // the request failed: c is resent, and evicted first in case the worker kept it
  sent = plan({{"c", c}});
  CHECK(sent.size() == 1);
  CHECK(evict == std::vector<std::string>{input_cache_key(c)});
  CHECK(store.count("c") == 1);
  InputCacheBook tiny(100, 64);  // a tensor larger than the capacity always travels in the file
  std::map<std::string, std::string> c2, s2;
  std::vector<std::string> e2;
  CHECK(tiny.plan({{"a", a}}, c2, s2, e2).size() == 1);
  CHECK(s2.empty());
}
