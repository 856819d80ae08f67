package logstore

import (
	"github.com/streamcast/streamcast/pkg/logstore/logconfig"
)

// A log's configuration is package logconfig's; these names keep
// logstore's API as it was.
type (
	// Config is a log's configuration (see logconfig.Config).
	Config = logconfig.Config
	// S3Config says how to reach an S3 service (see logconfig.S3Config).
	S3Config = logconfig.S3Config
)

// Defaults of the Config fields left at zero (see logconfig).
const (
	DefaultTargetSealBytes            = logconfig.DefaultTargetSealBytes
	DefaultTargetFileBytes            = logconfig.DefaultTargetFileBytes
	DefaultStagingRetention           = logconfig.DefaultStagingRetention
	DefaultStagingMaxBytes            = logconfig.DefaultStagingMaxBytes
	DefaultPublishedSnapshotRetention = logconfig.DefaultPublishedSnapshotRetention
	DefaultDeleteGrace                = logconfig.DefaultDeleteGrace
	DefaultLocalDeleteGrace           = logconfig.DefaultLocalDeleteGrace
	DefaultRetentionGrace             = logconfig.DefaultRetentionGrace
)

// Names of the columns every sealed file carries before the declared ones,
// and of the single column that holds rows of a stream without a schema.
const (
	OffsetColumn = "streamcast_offset"
	TSColumn     = "streamcast_ts"
	RowColumn    = "streamcast_row"
)
