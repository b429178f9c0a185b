package store

// SQLPendingCommands is the command poll's statement, for its benchmark.
const SQLPendingCommands = sqlPendingCommands
