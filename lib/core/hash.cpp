#include "ws1/hash.hpp"

#include <openssl/evp.h>
#include <xxhash.h>

#include <array>
#include <cstdio>
#include <stdexcept>

namespace ws1 {
namespace {

std::string hex_of(const unsigned char* p, std::size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (std::size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[p[i] >> 4];
    out[2 * i + 1] = kDigits[p[i] & 15];
  }
  return out;
}

std::string canonical_hex(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);  // big-endian: high64 then low64
  return hex_of(c.digest, sizeof(c.digest));
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace

std::string xxh3_128_hex(std::span<const std::byte> bytes) {
  return canonical_hex(XXH3_128bits(bytes.data(), bytes.size()));
}
std::string xxh3_128_hex(std::string_view text) { return xxh3_128_hex(as_bytes(text)); }

struct Xxh3Hasher::State {
  XXH3_state_t* s = XXH3_createState();
  ~State() { XXH3_freeState(s); }
};

Xxh3Hasher::Xxh3Hasher() : state_(std::make_unique<State>()) {
  if (state_->s == nullptr || XXH3_128bits_reset(state_->s) != XXH_OK)
    throw std::bad_alloc();
}
Xxh3Hasher::~Xxh3Hasher() = default;
void Xxh3Hasher::update(std::span<const std::byte> bytes) {
  XXH3_128bits_update(state_->s, bytes.data(), bytes.size());
}
void Xxh3Hasher::update(std::string_view text) { update(as_bytes(text)); }
std::string Xxh3Hasher::hex() const { return canonical_hex(XXH3_128bits_digest(state_->s)); }

struct Sha256Hasher::State {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~State() { EVP_MD_CTX_free(ctx); }
};

Sha256Hasher::Sha256Hasher() : state_(std::make_unique<State>()) {
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw std::bad_alloc();
}
Sha256Hasher::~Sha256Hasher() = default;
void Sha256Hasher::update(std::span<const std::byte> bytes) {
  EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size());
}
void Sha256Hasher::update(std::string_view text) { update(as_bytes(text)); }
std::string Sha256Hasher::hex() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(state_->ctx, md.data(), &n);
  return hex_of(md.data(), n);
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  Sha256Hasher h;
  h.update(bytes);
  return h.hex();
}
std::string sha256_hex(std::string_view text) { return sha256_hex(as_bytes(text)); }

}  // namespace ws1
