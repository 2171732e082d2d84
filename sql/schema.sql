-- dlock's table (MySQL 8.0 / MariaDB 10.6+): one table for every kind of
-- hold, schema version 3 (its COMMENT says so).
-- The library creates it itself when Options::create_table is true (the
-- default). Apply this file instead where the account has no DDL rights; the
-- table name may be changed (Options::table), nothing else. A client checks
-- the version at startup and refuses a table of another one, naming both.
-- The tables of dlock 0.1 and 0.2 (a lock table, "<table>_sem", "<table>_rw"
-- and "<table>_rwr") are migrated into this one by `dlock init`, holds and
-- fences kept, once every old client has stopped; a view then stands where
-- each old table was, so an old client started by mistake fails loudly.
--
-- A row is (kind, lock_name, slot): kind 1 a lock (slot 0); 2 a semaphore
-- slot (slot 0 .. bound-1, one permit each); 3 a read-write lock's head
-- (slot 0: its write hold) or a waiting writer's mark (slot: its client's
-- key); 4 a read hold (slot: the reading client's 48-bit key, then the
-- number of its slot on that name); 5 a fair lock (slot 0: its hold;
-- slot > 0: its queue); 6 an election (slot 0: the leadership); 7 a
-- parked observer of an election (never a hold); src/base/kinds_table.hpp
-- is the same list in code. Rows are made on first use and not deleted
-- (the fence must survive), except read holds' slot rows, writers' marks
-- and fair queue entries: a client that ends cleanly deletes its own, and
-- any client deletes such rows that have been free or expired, and
-- untouched, for an hour (those of clients that died).
-- A hold is live while expire_time is ahead of the server's clock. A
-- release sets state = 0, moves expire_time into the past and leaves the
-- other columns as the last hold wrote them (the next take then rewrites
-- the row in place); read them as the holder only while the hold is live.
-- No column is NULL but an election's value: a NULL has no length, and a
-- column that changed between NULL and a value would make every take and
-- release rewrite the whole record.
CREATE TABLE IF NOT EXISTS `distributed_lock` (
  kind          TINYINT UNSIGNED NOT NULL COMMENT '1 lock, 2 semaphore slot, 3 read-write lock, 4 read hold, 5 fair lock, 6 election, 7 parked election observer',
  lock_name     VARBINARY(255)   NOT NULL COMMENT 'the name; bytes, compared exactly',
  slot          BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'semaphore: 0..bound-1; read hold: its client and slot; fair lock: 0 the hold, n > 0 the queue',
  hold_id       BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'random id of the current or last hold',
  owner_id      BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'the holding owner within its client',
  machine_id    VARBINARY(64)    NOT NULL DEFAULT '' COMMENT 'label of the holding client',
  holder_host   VARBINARY(255)   NOT NULL DEFAULT '' COMMENT 'host name of the holding client',
  holder_pid    INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'process id of the holding client',
  acquired_at   DATETIME(6)      NOT NULL DEFAULT '1970-01-02 00:00:00' COMMENT 'server clock (UTC): when the hold was granted',
  expire_time   DATETIME(6)      NOT NULL DEFAULT '1970-01-02 00:00:00' COMMENT 'server clock (UTC): the hold is live until then; a release moves it into the past',
  state         INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy); 0 once released',
  watchdog      TINYINT(1)       NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',
  fence         BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'fencing token of the current or last hold',
  bell          VARBINARY(64)    NOT NULL DEFAULT '' COMMENT 'user-level lock of the holding session',
  waiters       TINYINT(1)       NOT NULL DEFAULT 0 COMMENT '1: a waiter elsewhere waits for the bell',
  intent_id     BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'client whose waiter goes next while intent_expire is ahead',
  intent_expire DATETIME(6)      NOT NULL DEFAULT '1970-01-02 00:00:00',
  bound         INT UNSIGNED     NOT NULL DEFAULT 0 COMMENT 'semaphore slot: the bound of its permit',
  read_taken    TINYINT(1)       NOT NULL DEFAULT 0 COMMENT 'read-write lock: 1 once a read is taken, until a write is taken that found no live read',
  lease_us      BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'fair lock queue entry: the lease of its hold',
  revision      BIGINT UNSIGNED  NOT NULL DEFAULT 0 COMMENT 'election: grows with every change',
  value         MEDIUMBLOB       NULL     COMMENT 'election: what the leader proclaimed',
  gmt_create    DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  gmt_modified  DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (kind, lock_name, slot)
) ENGINE=InnoDB COMMENT='dlock schema 3: the rows of every lock, semaphore and read-write lock';
