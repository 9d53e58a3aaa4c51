"""Preparers that turn a user's copy of an official dataset release into public/ and private/.

One module per kind of layout, shared by every task that uses it; a task file picks the
function and passes the layout details as `data.params`. Each preparer is called as
`prepare(public, private, *, source, progress=None, **params)`, refuses a layout it does not
recognise with a `LayoutError` saying what it expected and what it found, and is deterministic
(seeded case selection, stable file names), so preparing twice gives the same bytes.
"""
