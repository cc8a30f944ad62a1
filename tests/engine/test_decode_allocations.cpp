// A decode step allocates nothing on the host in our code (the speed issue's "no per-token
// host allocations"): this binary counts every C++ allocation (global operator new; PoCL's own
// allocations go through malloc from C and are not ours to remove) and compares two greedy
// answers of different lengths from the same prompt, after a first answer has built every
// kernel (LLVM allocates through operator new while compiling).
#include <atomic>
#include <cstdlib>
#include <new>
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "tests/support/gguf_test_util.h"

namespace {
std::atomic<long> g_news{0};
}  // namespace

// Every non-aligned form is replaced, so memory never crosses between our malloc and a
// sanitizer's allocator (the standard library's stable_sort takes its buffer with the nothrow
// form and frees it with the plain delete). The aligned forms keep their own pairs.
namespace {
void* counted_malloc(std::size_t n) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n ? n : 1);
}
}  // namespace

void* operator new(std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) {
  if (void* p = counted_malloc(n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted_malloc(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace infinipot {
namespace {

TEST(DecodeAllocations, AGreedyDecodeStepAllocatesNothingOnTheHost) {
  EngineOptions o;
  o.model_path = test::real_model_path();
  Engine engine(o);
  engine.prepare(256);
  const auto prompt = engine.chat_prompt("", "Tell me about the moon.");
  GenerateOptions g;
  g.ignore_eos = true;
  auto allocations_of = [&](int n_predict) {
    g.n_predict = n_predict;
    const long before = g_news.load();
    const auto r = engine.generate(prompt, g);
    EXPECT_EQ(r.tokens.size(), size_t(n_predict));
    return g_news.load() - before;
  };
  allocations_of(8);  // builds every kernel of prefill and decode
  const long short_answer = allocations_of(16);
  const long long_answer = allocations_of(80);
  // 64 more decode steps. What may grow: the answer's token vector and text (doubling, so a
  // few times in all); a step that allocated would add at least 64.
  EXPECT_LE(long_answer - short_answer, 16) << short_answer << " allocations for 16 tokens, " << long_answer
                                            << " for 80";
  EXPECT_GT(short_answer, 0);  // the count works: a prefill allocates (its chunk vector, the result)
}

}  // namespace
}  // namespace infinipot
