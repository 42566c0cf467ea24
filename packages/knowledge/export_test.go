package knowledge

// maintOf is the maintenance of s's tables, with the default tuning.
func maintOf(s *Service) *Maintenance { return NewMaintenance(s, MaintenanceConfig{}) }
