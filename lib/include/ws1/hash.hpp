// Content hashes: XXH3-128 for fixtures (fast, canonical hex = high 64 bits then low 64,
// big-endian) and SHA-256 where an outside party pins the value (contracts, manifests, weights).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace ws1 {

std::string xxh3_128_hex(std::span<const std::byte> bytes);
std::string xxh3_128_hex(std::string_view text);
std::string sha256_hex(std::span<const std::byte> bytes);
std::string sha256_hex(std::string_view text);

// Streaming XXH3-128: feed pieces in order, get the same hash as over their concatenation.
class Xxh3Hasher {
 public:
  Xxh3Hasher();
  ~Xxh3Hasher();
  Xxh3Hasher(const Xxh3Hasher&) = delete;
  Xxh3Hasher& operator=(const Xxh3Hasher&) = delete;
  void update(std::span<const std::byte> bytes);
  void update(std::string_view text);
  std::string hex() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Streaming SHA-256 (for multi-GB weight shards read in pieces).
class Sha256Hasher {
 public:
  Sha256Hasher();
  ~Sha256Hasher();
  Sha256Hasher(const Sha256Hasher&) = delete;
  Sha256Hasher& operator=(const Sha256Hasher&) = delete;
  void update(std::span<const std::byte> bytes);
  void update(std::string_view text);
  std::string hex();  // finalizes

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ws1
