"""The CLI's blocking dialogs: ``tables`` (which ones we know, per CLI version), ``parse`` (reading
one, and the idle prompt, off the screen) and ``router`` (a dialog nobody answers -> one channel
request -> the keys that answer it)."""
