// ServerChoice (which server of a client's list it writes through) and the
// connection facts the cluster support rests on, without a database.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sql/connection.hpp"
#include "sql/server_choice.hpp"
#include "sql/server_profile.hpp"

namespace dlock {
namespace {

using details::ServerChoice;

ServerChoice three() { return ServerChoice({{"h1", 3306}, {"h2", 3307}, {"h3", 3308}}); }

TEST(ServerChoice, StartsOnTheFirstServerAndDescribesAll) {
  ServerChoice choice = three();
  EXPECT_EQ(choice.current(), 0u);
  EXPECT_EQ(choice.size(), 3u);
  EXPECT_EQ(choice.describe(), "h1:3306,h2:3307,h3:3308");
}

TEST(ServerChoice, MovesToTheNextOnlyWhenTheCurrentFailedAndTellsTheHook) {
  ServerChoice choice = three();
  std::vector<std::pair<std::string, std::string>> moves;
  choice.on_move([&](const ServerChoice::Server& from, const ServerChoice::Server& to) {
    moves.emplace_back(from.host, to.host);
  });
  EXPECT_EQ(choice.move_on(0), 1u);
  // Another thread's connection to h1 failing too is old news: no second move.
  EXPECT_EQ(choice.move_on(0), 1u);
  // A failure on a server that is not the current one never moves the choice
  // (in particular never back to it).
  EXPECT_EQ(choice.move_on(2), 1u);
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0], std::make_pair(std::string("h1"), std::string("h2")));
}

TEST(ServerChoice, AfterTheLastTriesTheFirstAgain) {
  ServerChoice choice = three();
  EXPECT_EQ(choice.move_on(0), 1u);
  EXPECT_EQ(choice.move_on(1), 2u);
  EXPECT_EQ(choice.move_on(2), 0u);
}

TEST(ServerChoice, OneServerNeverMovesAndAClearedHookIsNotCalled) {
  ServerChoice one({{"only", 3306}});
  int calls = 0;
  one.on_move([&](const ServerChoice::Server&, const ServerChoice::Server&) { ++calls; });
  EXPECT_EQ(one.move_on(0), 0u);
  ServerChoice choice = three();
  choice.on_move([&](const ServerChoice::Server&, const ServerChoice::Server&) { ++calls; });
  choice.on_move(nullptr);
  EXPECT_EQ(choice.move_on(0), 1u);
  EXPECT_EQ(calls, 0);
}

TEST(ServerChoice, SettingsFromOptionsShareOneChoiceOnlyWithFailoverServers) {
  Options options;
  options.host = "h1";
  options.port = 3306;
  EXPECT_EQ(details::ConnectionSettings::from(options).servers, nullptr) << "one server: no choice to make";
  options.failover_servers = {{"h2", 3307}, {"h3", 3308}};
  const auto settings = details::ConnectionSettings::from(options);
  ASSERT_NE(settings.servers, nullptr);
  EXPECT_EQ(settings.servers->describe(), "h1:3306,h2:3307,h3:3308");
  const auto copy = settings;  // as the pool, the io thread and the bells hold it
  copy.servers->move_on(0);
  EXPECT_EQ(settings.servers->current(), 1u) << "copies follow the same choice";
}

TEST(ServerProfile, NotReadyNodeIsAConnectionErrorAndASingleServerChangesNothing) {
  EXPECT_TRUE(details::is_connection_error(details::mysql_error::kWsrepNotReady));
  const details::ServerProfile single;
  EXPECT_FALSE(single.galera);
  EXPECT_EQ(single.session_settings(), "");
  EXPECT_EQ(single.deadlock_retry_limit(), 8);
  details::ServerProfile galera;
  galera.galera = true;
  EXPECT_EQ(galera.session_settings(), ", wsrep_sync_wait = 1");
  EXPECT_GT(galera.deadlock_retry_limit(), 1000) << "certification conflicts: bounded by the call's budget instead";
}

}  // namespace
}  // namespace dlock
