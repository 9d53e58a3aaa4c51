"""Small classical "models" the demo tasks ship to agents under public/models (copied as files).

They import only numpy / scipy / scikit-image / Pillow so an agent's cell can run them directly.
"""
