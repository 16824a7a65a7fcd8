"""What is particular to one store (SQLite, PostgreSQL, the SQL store they share): URLs, schemas
and their upgrades, the writer queue, wake-ups. What every store must do is tests/contract."""
