-- The server-wide sum of file sizes (GLASSBOX_FILES_MAX_BYTES) read from this index alone, not
-- from the rows that hold the bytes.
CREATE INDEX files_by_size ON files (size);
