// launch_region(name, launches): the kernel launches of one op call in one direction, so
// `ws1check bench` can time them without the host copies (bench.hpp). The launches must be
// repeatable: a region that accumulates into a buffer clears it itself.
#pragma once

#include <string_view>
#include <type_traits>

namespace ws1cuda {

// Runs fn(ctx) as bench.hpp describes when a BenchScope is active on this thread, else once.
void run_region(std::string_view name, void (*fn)(void*), void* ctx);

template <class F>
void launch_region(std::string_view name, F&& launches) {
  using Fn = std::remove_reference_t<F>;
  run_region(name, [](void* c) { (*static_cast<Fn*>(c))(); }, static_cast<void*>(&launches));
}

}  // namespace ws1cuda
