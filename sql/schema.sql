-- dlock tables (MySQL 8.0 / MariaDB 10.6+): the lock table, the semaphore table
-- and the two read-write lock tables.
-- The library creates it itself when Options::create_table is true (the
-- default). Apply this file instead where the account has no DDL rights; the
-- table name may be changed (Options::table), nothing else.
-- A table created by dlock 0.1.0 lacks hold_id, holder_host, holder_pid and
-- acquired_at, and an older one lacks bell and waiters (fast wake-up's
-- session bells); `dlock init` (or a client with create_table on) adds the
-- missing ones in place with one ALTER TABLE.
-- A lock row is held while is_locked = 1 and expire_time is in the future.
-- A release sets is_locked = 0 and leaves the last holder's columns as they
-- were (so the next take rewrites the row in place); read them as the
-- holder only while the row is held.
-- The semaphore table is named "<lock table>_sem"; the library makes it on a
-- client's first semaphore use (or `dlock init` does). One row per slot of a
-- semaphore, 0 .. bound-1, never deleted; a held permit is a slot carrying
-- the permit's id and an unexpired lease.
-- The read-write lock tables are "<lock table>_rw" (one head row per name,
-- never deleted: the write hold, the fence, the read count and a waiting
-- writer's mark) and "<lock table>_rwr" (reader slot rows: each client keeps
-- one row per read hold it has on a name at once, deletes them when it
-- ends); the library makes them on a client's first read-write lock use.
CREATE TABLE IF NOT EXISTS `distributed_lock` (
  lock_name    VARBINARY(255)  NOT NULL COMMENT 'lock name; bytes, compared exactly',
  machine_id   VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',
  thread_id    BIGINT UNSIGNED NULL     COMMENT 'holding owner within that client',
  hold_id      BIGINT UNSIGNED NULL     COMMENT 'random id of the current or last hold (is_locked says which)',
  holder_host  VARBINARY(255)  NULL     COMMENT 'host name of the holding client',
  holder_pid   INT UNSIGNED    NULL     COMMENT 'process id of the holding client',
  acquired_at  DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the hold was taken',
  state        INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy)',
  is_locked    TINYINT(1)      NOT NULL DEFAULT 0,
  watchdog     TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',
  expire_time  DATETIME(6)     NULL     COMMENT 'server clock (UTC); the hold is void from then',
  fence        BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'fencing token of the current or last hold',
  bell         VARBINARY(64)   NULL     COMMENT 'user-level lock of the holding session (fast wake-up)',
  waiters      TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: a waiter elsewhere waits for the bell',
  gmt_create   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  gmt_modified DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (lock_name)
) ENGINE=InnoDB COMMENT='dlock: one row per lock name, never deleted';

CREATE TABLE IF NOT EXISTS `distributed_lock_sem` (
  sem_name     VARBINARY(255)  NOT NULL COMMENT 'semaphore name; bytes, compared exactly',
  slot         INT UNSIGNED    NOT NULL COMMENT '0 .. bound-1; holds at most one permit',
  permits      INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'the bound its holder acquired under',
  hold_id      BIGINT UNSIGNED NULL     COMMENT 'random id of the permit held here; NULL when free',
  machine_id   VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',
  holder_host  VARBINARY(255)  NULL     COMMENT 'host name of the holding client',
  holder_pid   INT UNSIGNED    NULL     COMMENT 'process id of the holding client',
  acquired_at  DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the permit was taken',
  watchdog     TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',
  expire_time  DATETIME(6)     NULL     COMMENT 'server clock (UTC); the permit is void from then',
  fence        BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'bumped by every take of this slot',
  gmt_create   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  gmt_modified DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (sem_name, slot),
  UNIQUE KEY uk_hold_id (hold_id)
) ENGINE=InnoDB COMMENT='dlock: semaphore slots, one permit each; rows never deleted';

CREATE TABLE IF NOT EXISTS `distributed_lock_rw` (
  rw_name       VARBINARY(255)  NOT NULL COMMENT 'read-write lock name; bytes, compared exactly',
  machine_id    VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',
  thread_id     BIGINT UNSIGNED NULL     COMMENT 'holding owner within that client',
  hold_id       BIGINT UNSIGNED NULL     COMMENT 'random id of the current hold; NULL when free',
  holder_host   VARBINARY(255)  NULL     COMMENT 'host name of the holding client',
  holder_pid    INT UNSIGNED    NULL     COMMENT 'process id of the holding client',
  acquired_at   DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the hold was taken',
  state         INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy)',
  watchdog      TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',
  expire_time   DATETIME(6)     NULL     COMMENT 'server clock (UTC); the hold is void from then',
  fence         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'last write token (even); reads get fence + 1',
  readers       INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'read holds counted (void once read_expire passed)',
  read_expire   DATETIME(6)     NULL     COMMENT 'no counted read hold lasts past this',
  read_epoch    BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'moves on with every write take',
  intent_id     BIGINT UNSIGNED NULL     COMMENT 'a waiting writer''s client; new reads wait while live',
  intent_expire DATETIME(6)     NULL,
  gmt_create    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  gmt_modified  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (rw_name),
  UNIQUE KEY uk_hold_id (hold_id)
) ENGINE=InnoDB COMMENT='dlock: read-write locks, the write side and the read count; rows never deleted';

CREATE TABLE IF NOT EXISTS `distributed_lock_rwr` (
  rw_name       VARBINARY(255)  NOT NULL COMMENT 'read-write lock name',
  client_key    BIGINT UNSIGNED NOT NULL COMMENT 'the client this slot row belongs to',
  slot          INT UNSIGNED    NOT NULL COMMENT 'one row per read hold the client has at once',
  machine_id    VARBINARY(64)   NULL     COMMENT 'label of the holding client (Options::machine_id)',
  thread_id     BIGINT UNSIGNED NULL     COMMENT 'holding owner within that client',
  hold_id       BIGINT UNSIGNED NULL     COMMENT 'random id of the current hold; NULL when free',
  holder_host   VARBINARY(255)  NULL     COMMENT 'host name of the holding client',
  holder_pid    INT UNSIGNED    NULL     COMMENT 'process id of the holding client',
  acquired_at   DATETIME(6)     NULL     COMMENT 'server clock (UTC): when the hold was taken',
  state         INT UNSIGNED    NOT NULL DEFAULT 0 COMMENT 'hold count (reentrancy)',
  watchdog      TINYINT(1)      NOT NULL DEFAULT 0 COMMENT '1: the holder renews the lease',
  expire_time   DATETIME(6)     NULL     COMMENT 'server clock (UTC); the hold is void from then',
  fence         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'read token of the current or last hold',
  epoch         BIGINT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'the head''s read_epoch it was counted in',
  gmt_create    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  gmt_modified  DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (rw_name, client_key, slot),
  UNIQUE KEY uk_hold_id (hold_id),
  KEY ix_client_key (client_key)
) ENGINE=InnoDB COMMENT='dlock: read holds of read-write locks, in slot rows each client reuses';
