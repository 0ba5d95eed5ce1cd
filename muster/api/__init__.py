"""The object model: quantities, metadata, every kind, validation and foreign converters."""
