package terraform

// EncodeHandle is the handle an attempt records for the run led by pid.
var EncodeHandle = encodeHandle

// StartTime is the start time of process pid as a handle records it.
var StartTime = startTime
