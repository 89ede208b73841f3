"""The real Claude Code CLI's own reading of its argv, per version: which words are sub-commands,
which options take values and how, derived from the installed CLI (``derive``) and checked in
under ``data/<version>.json``; ``load`` reads one (stdlib only, for the launcher's start path).
"""
