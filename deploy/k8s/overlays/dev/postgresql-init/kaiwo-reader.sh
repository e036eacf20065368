#!/bin/sh
# PostgreSQL's image runs this once, when it makes the database (/docker-entrypoint-initdb.d),
# as POSTGRES_USER, the role the recorder connects as: the read-only role of the event store
# for the console (kaiwo-reader.psql).
psql --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v reader_role="${KAIWO_READER_ROLE:-kaiwo_reader}" \
  -v reader_password="$KAIWO_READER_PASSWORD" \
  -f /docker-entrypoint-initdb.d/kaiwo-reader.psql
