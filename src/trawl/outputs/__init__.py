"""Output files sent on from the data dir: an S3-API bucket (``--output s3://...``).

trawl.outputs.target parses the destination and lays out the object keys;
trawl.outputs.bucket is the client (obstore) that puts a file once, checksummed;
trawl.outputs.uploader is the stage that uploads each closed file off the event loop
and records it in the store.
"""
