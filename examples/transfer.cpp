// Transfers between accounts held by several processes at once: each
// transfer holds both accounts with one MultiLock, so no balance is read
// and written by two transfers at a time, and two transfers over the same
// accounts in opposite directions never deadlock.
//   transfer mysql://user:password@host:port/database DIR [TRANSFERS]
// Each account is a file DIR/account-N holding its balance; run several
// copies on one DIR (on one host, or a shared filesystem): the total
// never changes.
#include <dlock/dlock.hpp>

#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

namespace {

constexpr int kAccounts = 4;

std::string account(const std::string& dir, int n) { return dir + "/account-" + std::to_string(n); }

long read_balance(const std::string& path) {
  std::ifstream in(path);
  long balance = 100;  // an account never written yet opens with 100
  in >> balance;
  return balance;
}

void write_balance(const std::string& path, long balance) { std::ofstream(path, std::ios::trunc) << balance << "\n"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::cerr << "usage: transfer mysql://user:password@host:port/database DIR [TRANSFERS]\n";
    return 2;
  }
  const std::string dir = argv[2];
  const int transfers = argc == 4 ? std::stoi(argv[3]) : 20;
  dlock::DatabaseDistributedLock client(dlock::Options::from_url(argv[1]));
  std::mt19937 random(std::random_device{}());
  for (int i = 0; i < transfers; ++i) {
    const int from = static_cast<int>(random() % kAccounts);
    const int to = (from + 1 + static_cast<int>(random() % (kAccounts - 1))) % kAccounts;
    // Both accounts or neither, in whatever order they are named.
    dlock::MultiLock both = client.get_multi_lock({"account-" + std::to_string(from), "account-" + std::to_string(to)});
    std::lock_guard<dlock::MultiLock> guard(both);
    const long amount = static_cast<long>(random() % 10);
    write_balance(account(dir, from), read_balance(account(dir, from)) - amount);
    write_balance(account(dir, to), read_balance(account(dir, to)) + amount);
  }
  long total = 0;
  {
    std::vector<std::string> all;
    for (int n = 0; n < kAccounts; ++n) all.push_back("account-" + std::to_string(n));
    dlock::MultiLock every = client.get_multi_lock(all);
    std::lock_guard<dlock::MultiLock> guard(every);  // a consistent view of all of them
    for (int n = 0; n < kAccounts; ++n) total += read_balance(account(dir, n));
  }
  std::cout << transfers << " transfers done; total " << total << " (always " << 100 * kAccounts << ")\n";
  return total == 100 * kAccounts ? 0 : 1;
}
