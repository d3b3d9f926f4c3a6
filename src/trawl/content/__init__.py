"""The content stage and outputs: clean text, SimHash and duplicates, WARC files and
their CDXJ index, clean-text files and page events."""
