"""Small shared helpers: masking, stateless randomness, dropout."""
