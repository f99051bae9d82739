"""Models and text: sentence embeddings (ONNX Runtime or torch), spaCy, time expressions,
message chunking, entity-name comparison and the LLM client."""
