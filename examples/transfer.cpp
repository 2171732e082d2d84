// Money transfers between accounts that several processes make at once,
// the guarded way (docs/guarded-transactions.md): the balances live in the
// same database as the lock table; each transfer holds both accounts with
// one MultiLock (no deadlock between transfers in opposite directions),
// changes both balances in one transaction, and runs the locks' guard
// statement last, so the transaction commits only while both holds are
// live. A process paused past its lease (a long GC, SIGSTOP, a VM freeze)
// cannot commit a transfer computed from balances someone else has changed
// since: its guard fails and it rolls back.
//   transfer mysql://user:password@host:port/database [TRANSFERS]
// Run several copies at once against one database: the total never changes.
#include <dlock/connector.hpp>
#include <dlock/dlock.hpp>

#include <cppconn/connection.h>
#include <cppconn/prepared_statement.h>
#include <cppconn/resultset.h>
#include <cppconn/statement.h>
#include <mysql_driver.h>

#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kAccounts = 4;
constexpr long kOpening = 100;

std::string account(int n) { return "account-" + std::to_string(n); }

long balance(sql::Connection& db, int n) {
  std::unique_ptr<sql::PreparedStatement> read(db.prepareStatement("SELECT balance FROM transfer_accounts WHERE id = ?"));
  read->setInt(1, n);
  std::unique_ptr<sql::ResultSet> row(read->executeQuery());
  return row->next() ? row->getInt64(1) : 0;
}

void set_balance(sql::Connection& db, int n, long value) {
  std::unique_ptr<sql::PreparedStatement> write(
      db.prepareStatement("UPDATE transfer_accounts SET balance = ? WHERE id = ?"));
  write->setInt64(1, value);
  write->setInt(2, n);
  write->executeUpdate();
}

// One transfer of `amount` from `from` to `to`, both held by `both`.
// False: the holds were lost before the commit, and nothing changed.
bool transfer(sql::Connection& db, const dlock::MultiLock& both, int from, int to, long amount) {
  db.setAutoCommit(false);
  try {
    set_balance(db, from, balance(db, from) - amount);
    set_balance(db, to, balance(db, to) + amount);
    dlock::guard(db, both);  // last: fails unless both holds are live
    db.commit();
  } catch (const dlock::LockLostError&) {
    db.rollback();
    db.setAutoCommit(true);
    return false;
  }
  db.setAutoCommit(true);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: transfer mysql://user:password@host:port/database [TRANSFERS]\n";
    return 2;
  }
  const int transfers = argc == 3 ? std::stoi(argv[2]) : 20;
  const dlock::Options options = dlock::Options::from_url(argv[1]);
  dlock::DatabaseDistributedLock client(options);
  // The program's own connection to the same database, for its data.
  std::unique_ptr<sql::Connection> db(sql::mysql::get_mysql_driver_instance()->connect(
      "tcp://" + options.host + ":" + std::to_string(options.port), options.user, options.password));
  db->setSchema(options.database);
  {
    std::unique_ptr<sql::Statement> st(db->createStatement());
    st->execute("CREATE TABLE IF NOT EXISTS transfer_accounts (id INT PRIMARY KEY, balance BIGINT NOT NULL)");
    for (int n = 0; n < kAccounts; ++n)
      st->execute("INSERT IGNORE INTO transfer_accounts VALUES (" + std::to_string(n) + ", " + std::to_string(kOpening) +
                  ")");
  }
  std::mt19937 random(std::random_device{}());
  int rolled_back = 0;
  for (int i = 0; i < transfers; ++i) {
    const int from = static_cast<int>(random() % kAccounts);
    const int to = (from + 1 + static_cast<int>(random() % (kAccounts - 1))) % kAccounts;
    const long amount = static_cast<long>(random() % 10);
    // Both accounts or neither, in whatever order they are named.
    dlock::MultiLock both = client.get_multi_lock({account(from), account(to)});
    std::lock_guard<dlock::MultiLock> held(both);
    if (!transfer(*db, both, from, to, amount)) ++rolled_back;  // lost: nothing was written
  }
  long total = 0;
  {
    std::vector<std::string> all;
    for (int n = 0; n < kAccounts; ++n) all.push_back(account(n));
    dlock::MultiLock every = client.get_multi_lock(all);
    std::lock_guard<dlock::MultiLock> held(every);  // a consistent view of all of them
    for (int n = 0; n < kAccounts; ++n) total += balance(*db, n);
  }
  std::cout << transfers << " transfers (" << rolled_back << " rolled back: their holds were lost); total " << total
            << " (always " << kOpening * kAccounts << ")\n";
  return total == kOpening * kAccounts ? 0 : 1;
}
