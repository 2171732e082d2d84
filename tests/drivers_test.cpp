// The engine's one pair of drivers (engine/wait.hpp), each given the same
// scripted wait: both end every wait exactly once, a single attempt too,
// telling ended() whether it acquired; an ended() that throws ends the
// wait all the same; a step that throws is the wait's error.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <vector>

#include "api/tools.hpp"
#include "engine/async_wait.hpp"
#include "test_env.hpp"

namespace dlock::details {
namespace {

using namespace std::chrono_literals;

// What the drivers did to one scripted wait.
struct Seen {
  std::atomic<int> steps{0};
  std::atomic<int> ended{0};
  std::atomic<bool> done{false};
};

// Steps through `script` (its last entry repeats); rule and listening as given.
class Scripted final : public WaitRule, public Wait {
 public:
  Scripted(Listen how, WaitRule its_rule, std::vector<AcquireStep> script, Seen& seen, bool ended_throws = false,
           bool step_throws = false)
      : WaitRule(its_rule),
        Wait(how, *this, 1, std::nullopt, "dlock: a scripted wait was cancelled"),
        script_(std::move(script)),
        seen_(seen),
        ended_throws_(ended_throws),
        step_throws_(step_throws) {}

  AcquireStep step() override {
    const auto at = static_cast<std::size_t>(seen_.steps.fetch_add(1));
    if (step_throws_) throw BackendError("dlock: a scripted step failed", 0, "");
    return script_[std::min(at, script_.size() - 1)];
  }
  std::vector<NameKey> keys() const override { return {NameKey(Kind::kLock, "drivers-scripted")}; }
  void ended(bool done) override {
    seen_.done = done;
    seen_.ended.fetch_add(1);
    if (ended_throws_) throw std::runtime_error("a scripted ended() threw");
  }

 private:
  const std::vector<AcquireStep> script_;
  Seen& seen_;
  const bool ended_throws_;
  const bool step_throws_;
};

// The asynchronous driver's outcome: the error it completed with, or none.
class Outcome final : public asio_impl::AsyncCompletion {
 public:
  explicit Outcome(std::promise<std::exception_ptr>& result) : result_(result) {}
  void complete(std::exception_ptr error, std::uint64_t /*value*/) noexcept override {
    auto& result = result_;
    delete this;  // consumed, as AsyncCompletion asks
    result.set_value(std::move(error));
  }

 private:
  std::promise<std::exception_ptr>& result_;
};

AcquireStep gave_up() { return AcquireStep{AcquireStep::Next::kGaveUp, 0us}; }
AcquireStep acquired() { return AcquireStep{AcquireStep::Next::kAcquired, 0us}; }
AcquireStep wait_a_little() { return AcquireStep{AcquireStep::Next::kWait, 2000us}; }

WaitRule one_attempt() { return WaitRule::of(0ms); }
WaitRule for_a_while() { return WaitRule::of(30s); }

class Drivers : public ::testing::TestWithParam<Wait::Listen> {
 protected:
  Drivers() : client_(test::fresh_options()), engine_(EngineAccess::of(client_)) {}

  // Runs `wait` on the blocking driver.
  void block(Scripted& wait) { (void)engine_.wait(wait); }
  // Runs `wait` on the asynchronous driver; the error it completed with.
  std::exception_ptr async(std::unique_ptr<Scripted> wait) {
    std::promise<std::exception_ptr> result;
    auto future = result.get_future();
    AsyncWait::start(engine_, std::move(wait), std::make_unique<Outcome>(result));
    EXPECT_EQ(future.wait_for(30s), std::future_status::ready) << "the asynchronous wait never completed";
    return future.get();
  }

  DatabaseDistributedLock client_;
  Engine& engine_;
};

TEST_P(Drivers, BothEndARefusedSingleAttemptOnceAsNotAcquired) {
  Seen blocking;
  Scripted wait(GetParam(), one_attempt(), {gave_up()}, blocking);
  block(wait);
  EXPECT_EQ(blocking.steps, 1);
  EXPECT_EQ(blocking.ended, 1) << "the blocking driver did not end a single attempt";
  EXPECT_FALSE(blocking.done);

  Seen asynchronous;
  EXPECT_EQ(async(std::make_unique<Scripted>(GetParam(), one_attempt(), std::vector{gave_up()}, asynchronous)),
            nullptr);
  EXPECT_EQ(asynchronous.steps, 1);
  EXPECT_EQ(asynchronous.ended, 1) << "the asynchronous driver did not end a single attempt";
  EXPECT_FALSE(asynchronous.done);
}

TEST_P(Drivers, BothEndAWaitThatAcquiredOnceAsAcquired) {
  const std::vector<std::pair<WaitRule, std::vector<AcquireStep>>> cases = {
      {one_attempt(), {acquired()}}, {for_a_while(), {wait_a_little(), wait_a_little(), acquired()}}};
  for (const auto& [rule, script] : cases) {
    Seen blocking;
    Scripted wait(GetParam(), rule, script, blocking);
    block(wait);
    EXPECT_EQ(blocking.steps, static_cast<int>(script.size()));
    EXPECT_EQ(blocking.ended, 1);
    EXPECT_TRUE(blocking.done);

    Seen asynchronous;
    EXPECT_EQ(async(std::make_unique<Scripted>(GetParam(), rule, script, asynchronous)), nullptr);
    EXPECT_EQ(asynchronous.steps, static_cast<int>(script.size()));
    EXPECT_EQ(asynchronous.ended, 1);
    EXPECT_TRUE(asynchronous.done);
  }
}

TEST_P(Drivers, AnEndedThatThrowsStillEndsTheWaitWithoutAnError) {
  for (const auto& rule : {one_attempt(), for_a_while()}) {
    Seen blocking;
    Scripted wait(GetParam(), rule, {acquired()}, blocking, /*ended_throws=*/true);
    EXPECT_NO_THROW(block(wait));
    EXPECT_EQ(blocking.ended, 1);

    Seen asynchronous;
    EXPECT_EQ(async(std::make_unique<Scripted>(GetParam(), rule, std::vector{acquired()}, asynchronous, true)),
              nullptr);
    EXPECT_EQ(asynchronous.ended, 1);
  }
}

TEST_P(Drivers, AStepThatThrowsIsTheWaitsErrorAndStillEndsIt) {
  for (const auto& rule : {one_attempt(), for_a_while()}) {
    Seen blocking;
    Scripted wait(GetParam(), rule, {acquired()}, blocking, false, /*step_throws=*/true);
    EXPECT_THROW(block(wait), BackendError);
    EXPECT_EQ(blocking.ended, 1);
    EXPECT_FALSE(blocking.done);

    Seen asynchronous;
    const auto error =
        async(std::make_unique<Scripted>(GetParam(), rule, std::vector{acquired()}, asynchronous, false, true));
    ASSERT_NE(error, nullptr);
    EXPECT_THROW(std::rethrow_exception(error), BackendError);
    EXPECT_EQ(asynchronous.ended, 1);
    EXPECT_FALSE(asynchronous.done);
  }
}

INSTANTIATE_TEST_SUITE_P(Listening, Drivers, ::testing::Values(Wait::Listen::kTake, Wait::Listen::kWatch),
                         [](const auto& p) { return p.param == Wait::Listen::kTake ? "take" : "watch"; });

}  // namespace
}  // namespace dlock::details
