"""Retrievers return ranked chunk ids; fusion and signals are pure functions over those lists."""
