/**
 * Slicer metadata of print files (DESIGN section 12), read from texts the
 * caller already pulled out of the file (no I/O here): Bambu Studio and
 * OrcaSlicer 3MF projects, and PrusaSlicer, OrcaSlicer and Bambu Studio
 * G-code. Hostile input gives a SlicerMetadataError or a result, never
 * anything else: XML entities are not expanded, numbers are bounded, plates
 * and filaments are capped.
 */
export { readGcodeMetadata } from './gcode.js'
export { readThreeMfMetadata, type ThreeMfSources } from './three-mf.js'
export { SlicerMetadataError, type PlateSummary, type ProjectFilament, type SlicerMetadata } from './types.js'
