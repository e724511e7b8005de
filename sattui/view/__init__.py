"""The view model: what the screens draw, as plain data (no Textual here).

``data.ViewData`` is one redraw's read of a session; ``binning`` puts samples into the
buckets of the shared time axis; ``lines`` turns them into chart lines; ``fmt`` formats
numbers; ``stacktable`` counts functions for the stacks screen. The Textual widgets in
sattui/widgets/ draw these.
"""
