#!/bin/sh
# Run once by the postgres image when it creates the database: lets the read replica (compose
# profile "replica", docs/scaling.md) stream this server's WAL as the memora user.
set -e
echo "host replication ${POSTGRES_USER} all scram-sha-256" >> "$PGDATA/pg_hba.conf"
