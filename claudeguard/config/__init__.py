"""Layered TOML configuration: user file, project file, profile, extra file, command line.

``load.load_config`` returns the effective values with the file and line each came from;
``schema`` says which keys exist; ``lines`` finds where a key or value sits in a file;
``write`` adds rules back into a file with tomlkit, keeping comments and layout.
"""
