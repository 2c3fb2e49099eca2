"""The benchmark suite behind the README's figures and the archive of one-off studies (bench/README.md). A package
so that every script runs as ``python -m bench.<name>`` from the repository root and a spawned child imports the
script's functions by module name."""
