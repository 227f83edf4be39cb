"""Format readers: each turns a document's text into layout parts (see ``producer.layout``)."""
