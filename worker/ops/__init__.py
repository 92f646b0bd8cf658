"""Operations: the Redis connection, metrics, logs and usage accounting."""
