-- The tables of Cumulus v21's database that the granule writer reads and
-- writes, as Cumulus's own migrations leave them (columns, types,
-- defaults, checks, keys and indexes), for databases Cumulus did not
-- create. Every statement is idempotent.

CREATE TABLE IF NOT EXISTS async_operations (
    cumulus_id serial CONSTRAINT async_operations_pkey PRIMARY KEY,
    id uuid NOT NULL CONSTRAINT async_operations_id_unique UNIQUE,
    description text NOT NULL,
    operation_type text NOT NULL CONSTRAINT async_operations_operation_type_check CHECK (operation_type IN (
        'Bulk Granule Delete', 'Bulk Granule Reingest', 'Bulk Granules', 'Bulk Execution Delete', 'Data Migration',
        'Dead-Letter Processing', 'DLA Migration', 'ES Index', 'Kinesis Replay', 'Reconciliation Report',
        'Migration Count Report', 'SQS Replay')),
    output jsonb,
    status text NOT NULL CONSTRAINT async_operations_status_check CHECK (status IN ('RUNNING', 'SUCCEEDED', 'RUNNER_FAILED', 'TASK_FAILED')),
    task_arn text,
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX IF NOT EXISTS async_operations_status_operation_type_cumulus_id_index ON async_operations (status, operation_type, cumulus_id);
CREATE INDEX IF NOT EXISTS async_operations_updated_at_index ON async_operations (updated_at);

CREATE TABLE IF NOT EXISTS collections (
    cumulus_id serial CONSTRAINT collections_pkey PRIMARY KEY,
    name text NOT NULL,
    version text NOT NULL,
    sample_file_name text NOT NULL,
    granule_id_validation_regex text NOT NULL,
    granule_id_extraction_regex text NOT NULL,
    files jsonb NOT NULL,
    process text,
    url_path text,
    duplicate_handling text CONSTRAINT collections_duplicate_handling_check CHECK (duplicate_handling IN ('error', 'replace', 'skip', 'version')),
    report_to_ems boolean,
    ignore_files_config_for_discovery boolean,
    meta jsonb,
    tags jsonb,
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT collections_name_version_unique UNIQUE (name, version)
);
CREATE INDEX IF NOT EXISTS collections_updated_at_index ON collections (updated_at);

CREATE TABLE IF NOT EXISTS providers (
    cumulus_id serial CONSTRAINT providers_pkey PRIMARY KEY,
    name text NOT NULL CONSTRAINT providers_name_unique UNIQUE,
    protocol text NOT NULL DEFAULT 'http' CONSTRAINT providers_protocol_check CHECK (protocol IN ('http', 'https', 'ftp', 'sftp', 's3')),
    host text NOT NULL,
    port integer,
    username text,
    password text,
    global_connection_limit integer,
    private_key text,
    cm_key_id text,
    certificate_uri text,
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    allowed_redirects text[],
    max_download_time integer
);
CREATE INDEX IF NOT EXISTS providers_updated_at_index ON providers (updated_at);

CREATE TABLE IF NOT EXISTS executions (
    cumulus_id bigserial CONSTRAINT executions_pkey PRIMARY KEY,
    arn text NOT NULL CONSTRAINT executions_arn_unique UNIQUE,
    async_operation_cumulus_id integer CONSTRAINT executions_async_operation_cumulus_id_foreign REFERENCES async_operations (cumulus_id),
    collection_cumulus_id integer CONSTRAINT executions_collection_cumulus_id_foreign REFERENCES collections (cumulus_id),
    parent_cumulus_id bigint CONSTRAINT executions_parent_cumulus_id_foreign REFERENCES executions (cumulus_id) ON DELETE SET NULL,
    cumulus_version text,
    url text CONSTRAINT executions_url_unique UNIQUE,
    status text NOT NULL CONSTRAINT executions_status_check CHECK (status IN ('running', 'completed', 'failed', 'unknown')),
    tasks jsonb,
    error jsonb,
    workflow_name text,
    duration real,
    original_payload jsonb,
    final_payload jsonb,
    "timestamp" timestamptz,
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    archived boolean NOT NULL DEFAULT false
);
CREATE INDEX IF NOT EXISTS executions_archived_index ON executions (archived);
CREATE INDEX IF NOT EXISTS executions_collection_cumulus_id_index ON executions (collection_cumulus_id);
CREATE INDEX IF NOT EXISTS executions_parent_cumulus_id_index ON executions (parent_cumulus_id);
CREATE INDEX IF NOT EXISTS executions_status_collection_cumulus_id_index ON executions (status, collection_cumulus_id, cumulus_id);
CREATE INDEX IF NOT EXISTS executions_updated_at_index ON executions (updated_at);

CREATE TABLE IF NOT EXISTS pdrs (
    cumulus_id serial CONSTRAINT pdrs_pkey PRIMARY KEY,
    collection_cumulus_id integer NOT NULL CONSTRAINT pdrs_collection_cumulus_id_foreign REFERENCES collections (cumulus_id),
    provider_cumulus_id integer NOT NULL CONSTRAINT pdrs_provider_cumulus_id_foreign REFERENCES providers (cumulus_id),
    execution_cumulus_id bigint CONSTRAINT pdrs_execution_cumulus_id_foreign REFERENCES executions (cumulus_id),
    status text NOT NULL CONSTRAINT pdrs_status_check CHECK (status IN ('running', 'failed', 'completed')),
    name text NOT NULL CONSTRAINT pdrs_name_unique UNIQUE,
    progress real,
    pan_sent boolean,
    pan_message text,
    stats jsonb,
    address text,
    original_url text,
    duration real,
    "timestamp" timestamptz,
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX IF NOT EXISTS pdrs_coll_status_cumulus_id_index ON pdrs (collection_cumulus_id, status, cumulus_id);
CREATE INDEX IF NOT EXISTS pdrs_execution_cumulus_id_index ON pdrs (execution_cumulus_id);
CREATE INDEX IF NOT EXISTS pdrs_provider_collection_cumulus_id_name_index ON pdrs (provider_cumulus_id, collection_cumulus_id, name);
CREATE INDEX IF NOT EXISTS pdrs_status_provider_collection_cumulus_id_index ON pdrs (status, provider_cumulus_id, collection_cumulus_id, cumulus_id);
CREATE INDEX IF NOT EXISTS pdrs_updated_at_index ON pdrs (updated_at);

CREATE TABLE IF NOT EXISTS granules (
    cumulus_id bigserial CONSTRAINT granules_pkey PRIMARY KEY,
    granule_id text NOT NULL,
    status text NOT NULL CONSTRAINT granules_status_check CHECK (status IN ('running', 'completed', 'failed', 'queued')),
    collection_cumulus_id integer NOT NULL CONSTRAINT granules_collection_cumulus_id_foreign REFERENCES collections (cumulus_id),
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    published boolean,
    duration real,
    time_to_archive real,
    time_to_process real,
    product_volume bigint,
    error jsonb,
    cmr_link text,
    pdr_cumulus_id integer CONSTRAINT granules_pdr_cumulus_id_foreign REFERENCES pdrs (cumulus_id),
    provider_cumulus_id integer CONSTRAINT granules_provider_cumulus_id_foreign REFERENCES providers (cumulus_id),
    beginning_date_time timestamptz,
    ending_date_time timestamptz,
    last_update_date_time timestamptz,
    processing_end_date_time timestamptz,
    processing_start_date_time timestamptz,
    production_date_time timestamptz,
    query_fields jsonb,
    "timestamp" timestamptz,
    producer_granule_id text NOT NULL,
    archived boolean NOT NULL DEFAULT false,
    CONSTRAINT granules_collection_cumulus_id_granule_id_unique UNIQUE (collection_cumulus_id, granule_id)
);
CREATE INDEX IF NOT EXISTS granules_archived_index ON granules (archived);
CREATE INDEX IF NOT EXISTS granules_coll_status_processendtime_cumulus_id_index ON granules (collection_cumulus_id, status, processing_end_date_time, cumulus_id);
CREATE INDEX IF NOT EXISTS granules_granule_id_index ON granules (granule_id);
CREATE INDEX IF NOT EXISTS granules_producer_granule_id_index ON granules (producer_granule_id);
CREATE INDEX IF NOT EXISTS granules_provider_collection_cumulus_id_granule_id_index ON granules (provider_cumulus_id, collection_cumulus_id, granule_id);
CREATE INDEX IF NOT EXISTS granules_status_provider_collection_cumulus_id_index ON granules (status, provider_cumulus_id, collection_cumulus_id, cumulus_id);
CREATE INDEX IF NOT EXISTS granules_updated_at_index ON granules (updated_at);

CREATE TABLE IF NOT EXISTS files (
    cumulus_id bigserial CONSTRAINT files_pkey PRIMARY KEY,
    granule_cumulus_id bigint NOT NULL CONSTRAINT files_granule_cumulus_id_foreign REFERENCES granules (cumulus_id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP,
    file_size bigint,
    bucket text NOT NULL,
    checksum_type text,
    checksum_value text,
    file_name text,
    key text NOT NULL,
    path text,
    source text,
    type text,
    CONSTRAINT files_bucket_key_unique UNIQUE (bucket, key)
);
CREATE INDEX IF NOT EXISTS files_granule_cumulus_id_index ON files (granule_cumulus_id);
CREATE INDEX IF NOT EXISTS files_updated_at_index ON files (updated_at);

CREATE TABLE IF NOT EXISTS granules_executions (
    granule_cumulus_id bigint NOT NULL CONSTRAINT granules_executions_granule_cumulus_id_foreign REFERENCES granules (cumulus_id) ON DELETE CASCADE,
    execution_cumulus_id bigint NOT NULL CONSTRAINT granules_executions_execution_cumulus_id_foreign REFERENCES executions (cumulus_id) ON DELETE CASCADE,
    CONSTRAINT granules_executions_granule_cumulus_id_execution_cumulus_id_uni UNIQUE (granule_cumulus_id, execution_cumulus_id)
);
