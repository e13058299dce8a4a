/** The report types every adapter produces (see index.ts). */
export type PrinterType = 'bambu' | 'prusa_connect' | 'octoprint' | 'klipper' | 'snapmaker' | 'flashforge'

/** What a printer's status word means. */
export type Phase = 'idle' | 'busy' | 'printing' | 'paused' | 'finished' | 'cancelled' | 'error' | 'offline'

export interface ReportTemperature {
  actual?: number | null
  target?: number | null
}

export interface ReportError {
  code: string
  message: string | null
}

export interface ReportFilament {
  slot: number
  type: string | null
  color_hex: string | null
  remaining_percent: number | null
}

export interface PrinterReport {
  /** The printer's own word exactly as sent (trimmed, at most 200 characters). */
  status?: string
  /** What the word means for this type; absent for an unknown word. */
  phase?: Phase
  temperatures?: { nozzle?: ReportTemperature; bed?: ReportTemperature; chamber?: ReportTemperature }
  /** 0-100. */
  progress?: number
  remaining_seconds?: number
  layer?: number
  total_layers?: number
  file_name?: string
  /** An error the report states; null when it says explicitly there is none; absent when it says nothing. */
  error?: ReportError | null
  filaments?: ReportFilament[]
}
