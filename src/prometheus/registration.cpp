// register_metrics: a MetricsCollectable served by an Exposer for as long as
// its MetricsRegistration lives.
#include "dlock/prometheus.hpp"

namespace dlock::prometheus {

MetricsRegistration::MetricsRegistration(::prometheus::Exposer& exposer,
                                         std::shared_ptr<MetricsCollectable> collectable, std::string uri)
    : exposer_(&exposer), collectable_(std::move(collectable)), uri_(std::move(uri)) {}

MetricsRegistration::~MetricsRegistration() { reset(); }

MetricsRegistration::MetricsRegistration(MetricsRegistration&& other) noexcept
    : exposer_(other.exposer_), collectable_(std::move(other.collectable_)), uri_(std::move(other.uri_)) {
  other.exposer_ = nullptr;
}

MetricsRegistration& MetricsRegistration::operator=(MetricsRegistration&& other) noexcept {
  if (this != &other) {
    reset();
    exposer_ = other.exposer_;
    collectable_ = std::move(other.collectable_);
    uri_ = std::move(other.uri_);
    other.exposer_ = nullptr;
  }
  return *this;
}

void MetricsRegistration::reset() noexcept {
  if (!collectable_) return;
  // Detached first: a scrape that already holds the collectable returns
  // nothing rather than read a client that may be gone next.
  collectable_->detach();
  try {
    if (exposer_ != nullptr) exposer_->RemoveCollectable(collectable_, uri_);
  } catch (...) {
    // The exposer drops expired collectables by itself.
  }
  collectable_.reset();
  exposer_ = nullptr;
}

MetricsRegistration register_metrics(::prometheus::Exposer& exposer, const DatabaseDistributedLock& client,
                                     ::prometheus::Labels labels, const std::string& uri) {
  auto collectable = std::make_shared<MetricsCollectable>(client, std::move(labels));
  exposer.RegisterCollectable(collectable, uri);
  return MetricsRegistration(exposer, std::move(collectable), uri);
}

}  // namespace dlock::prometheus
