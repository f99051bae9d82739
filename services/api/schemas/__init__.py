"""The API's request and response bodies, one module per area. Routes parse with these, call
one use case of `memora.usecases` and map its result with them."""
