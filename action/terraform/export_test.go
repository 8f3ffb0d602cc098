package terraform

// EncodeHandle is the handle an attempt records for the run led by pid.
var EncodeHandle = encodeHandle
