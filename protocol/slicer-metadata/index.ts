/**
 * Slicer metadata of print files (docs/files.md), read from texts the
 * caller already took out of the file (no I/O here): Bambu Studio and
 * OrcaSlicer 3MF projects, and PrusaSlicer, OrcaSlicer and Bambu Studio
 * G-code. Hostile input gives a SlicerMetadataError or a result, never
 * anything else, in bounded time: no DOCTYPE is accepted and no entity
 * expanded, numbers are bounded, plates and filaments capped.
 */
export { readGcodeMetadata } from './gcode.js'
export { readThreeMfMetadata } from './three-mf.js'
export { SlicerMetadataError, type PlateSummary, type ProjectFilament, type SlicerMetadata, type ThreeMfSources } from './types.js'
