// The asynchronous driver of an election's observer (async_observe): the
// counterpart of Elections::observe over the same step (Elections::observe_step).
// It watches the election's name and parks between looks as a
// WatchedOperation; a wake, the next look's time (a lease's end) or a
// cancellation brings the next look. It completes with the view set when
// it saw one.
#pragma once

#include <functional>
#include <memory>

#include "engine/watched_operation.hpp"
#include "primitives/election/elections.hpp"

namespace dlock::details {

class AsyncObserve final : public WatchedOperation {
 public:
  // Starts an observer for `request` on the engine's workers; `completion`
  // gets void(exception, 1 when it saw a view: set_view() gave it first).
  // Returns the id per-operation cancellation uses (0 if there is nothing
  // to cancel). `on_end` (may be empty) runs once, right before the
  // completion.
  static std::uint64_t start(Elections& elections, ObserveRequest request,
                             std::unique_ptr<asio_impl::AsyncCompletion> completion, std::function<void()> on_end = {});

  AsyncObserve(Elections& elections, ObserveRequest request, std::unique_ptr<asio_impl::AsyncCompletion> completion,
               std::function<void()> on_end);

 private:
  Outcome run_step() override;

  Elections& elections_;
  const ObserveRequest request_;
};

}  // namespace dlock::details
