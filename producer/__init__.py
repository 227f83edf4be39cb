"""Reading, segmenting and reassembling documents; the transqueue CLI."""
