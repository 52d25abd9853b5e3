#!/usr/bin/env python3
"""Seeds a stopped Keyfob's SQLite database with N filler accounts, one passkey each, written
directly (registering a million users through the API would take hours). The rows have the
shapes the server writes; their public keys are random bytes, so no one can sign in with them —
they are there to make the tables and indexes the size of a large deployment.

    scripts/load/seed.py /tmp/keyfob-load/data/keyfob.sqlite 1000000
"""
import os
import sqlite3
import sys
import time


def main():
    path, count = sys.argv[1], int(sys.argv[2])
    db = sqlite3.connect(path)
    version = db.execute("PRAGMA user_version").fetchone()[0]
    if version < 6:
        raise SystemExit(f"{path} has schema version {version}: start keyfob once on it first")
    now = time.time()
    batch = 50_000
    with db:
        for first in range(0, count, batch):
            users, credentials = [], []
            for n in range(first, min(count, first + batch)):
                user_id = os.urandom(32).hex()
                users.append((user_id, f"seed{n}", 0, now))
                credentials.append((os.urandom(16), user_id, os.urandom(77), -7, 0, "internal", bytes(16), "none",
                                    1, 1, now, None, 0, None, None))
            db.executemany("INSERT INTO users (id, username, is_anonymous, created_at) VALUES (?, ?, ?, ?)", users)
            db.executemany(
                """INSERT INTO credentials (id, user_id, public_key, algorithm, sign_count, transports, aaguid,
                   attestation_format, backup_eligible, backup_state, created_at, last_used_at, attestation_trusted,
                   name, created_on) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""", credentials)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    total = db.execute("SELECT count(*) FROM credentials").fetchone()[0]
    print(f"seeded {count} accounts; {total} passkeys stored")


if __name__ == "__main__":
    main()
