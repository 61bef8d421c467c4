import polars as pl

print(pl.DataFrame({"a": [1, 2, 3]}).sum())
